#!/bin/sh
# release/release.sh x.y.z (make release VERSION=x.y.z), in the repository's root: cuts release
# x.y.z of what CHANGELOG.md's Unreleased section holds. The section becomes "## [x.y.z] - today"
# under a new empty Unreleased, with its link reference; the contracts as they are now become the
# last release's copies in release/; xcaddy.json pins the module at
# vx.y.z. It commits and tags nothing: review the diff, commit it, then tag vx.y.z.
set -eu

module=github.com/postsedge/caddy-posts
changelog=CHANGELOG.md
recipes="xcaddy.json"

fail() {
	echo "release: $*" >&2
	exit 1
}

version=${1:-}
[ -n "$version" ] || fail "usage: make release VERSION=x.y.z"
printf '%s\n' "$version" | grep -Eqx '(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)' ||
	fail "$version is not a version x.y.z"

# Every check comes before the first change, so that a refused release leaves the files as they were.
for file in "$changelog" openapi/openapi.yaml schema/schema.graphql $recipes; do
	[ -f "$file" ] || fail "no $file here: run it in the repository's root"
done
latest=$(sed -n 's/^## \[\([0-9]*\.[0-9]*\.[0-9]*\)\] - .*/\1/p' "$changelog" | head -n 1)
if [ -n "$latest" ]; then
	highest=$(printf '%s\n%s\n' "$latest" "$version" | sort -t . -k 1,1n -k 2,2n -k 3,3n | tail -n 1)
	{ [ "$highest" = "$version" ] && [ "$version" != "$latest" ]; } ||
		fail "$version is not above $changelog's latest release, $latest"
fi
grep -qx '## \[Unreleased\]' "$changelog" || fail "$changelog has no ## [Unreleased] section"
# The Unreleased section runs to the next release's heading or to the link references.
awk '/^## \[Unreleased\]$/ { u = 1; next } /^## / || /^\[[^]]*\]: / { u = 0 } u && NF { found = 1 } END { exit !found }' \
	"$changelog" || fail "the Unreleased section of $changelog is empty: there is nothing to release"
repo=$(sed -n -e 's#^\[Unreleased\]: \(.*\)/compare/.*#\1#p' -e 's#^\[Unreleased\]: \(.*\)/commits/HEAD$#\1#p' "$changelog")
[ -n "$repo" ] || fail "$changelog has no [Unreleased] link reference at the bottom"

today=$(date +%Y-%m-%d)
awk -v version="$version" -v latest="$latest" -v repo="$repo" -v today="$today" '
/^## \[Unreleased\]$/ {
	print
	print ""
	print "## [" version "] - " today
	next
}
/^\[Unreleased\]: / {
	print "[Unreleased]: " repo "/compare/v" version "...HEAD"
	if (latest != "")
		print "[" version "]: " repo "/compare/v" latest "...v" version
	else
		print "[" version "]: " repo "/releases/tag/v" version
	next
}
{ print }' "$changelog" >"$changelog.tmp"
mv "$changelog.tmp" "$changelog"

mkdir -p release
cp openapi/openapi.yaml release/openapi.yaml
cp schema/schema.graphql release/schema.graphql

# The module's "version" follows its "module_path" in the plugins; the replacement's "old" is
# module@version. Other plugins' versions stay.
for recipe in $recipes; do
	awk -v module="$module" -v version="v$version" '
	index($0, "\"module_path\": \"" module "\"") { mine = 1 }
	mine && /"version":/ { sub(/"version": "[^"]*"/, "\"version\": \"" version "\""); mine = 0 }
	{ i = index($0, module "@"); if (i) { rest = substr($0, i + length(module) + 1); $0 = substr($0, 1, i - 1) module "@" version substr(rest, index(rest, "\"")) } }
	{ print }' "$recipe" >"$recipe.tmp"
	mv "$recipe.tmp" "$recipe"
done

echo "release $version: $changelog, release/ and xcaddy.json changed; review them (git diff), commit, then tag v$version."
