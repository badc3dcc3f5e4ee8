#!/bin/sh
# Re-downloads the vendored GraphiQL and React files from the npm registry at the pinned versions
# below, copies them next to this script and prints their sha256 sums (record them in README.md).
# Usage: handlers/graphiql/update.sh   (needs npm, tar and sha256sum)
#
# To move to another GraphiQL version, change GRAPHIQL here and graphiqlVersion in
# handlers/graphiql.go (the asset URLs carry the version, so browsers fetch the new files).
set -eu

GRAPHIQL=3.9.0 # the last release with a UMD build; 4.x needs a bundler
REACT=18.3.1   # GraphiQL 3 supports React 16.8 to 18; React 19 has no UMD build

dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cd "$tmp"
npm pack --silent "graphiql@$GRAPHIQL" "react@$REACT" "react-dom@$REACT" >/dev/null
for pkg in "graphiql-$GRAPHIQL" "react-$REACT" "react-dom-$REACT"; do
	mkdir "$pkg"
	tar -xzf "$pkg.tgz" -C "$pkg"
done

cp "graphiql-$GRAPHIQL/package/graphiql.min.js" "$dir/graphiql.min.js"
cp "graphiql-$GRAPHIQL/package/graphiql.min.css" "$dir/graphiql.min.css"
cp "graphiql-$GRAPHIQL/package/LICENSE" "$dir/LICENSE.graphiql"
cp "react-$REACT/package/umd/react.production.min.js" "$dir/react.production.min.js"
cp "react-dom-$REACT/package/umd/react-dom.production.min.js" "$dir/react-dom.production.min.js"
# react and react-dom carry the same MIT license; keep one copy and fail if they ever differ.
cmp -s "react-$REACT/package/LICENSE" "react-dom-$REACT/package/LICENSE" ||
	{ echo "react and react-dom licenses differ; vendor both" >&2; exit 1; }
cp "react-$REACT/package/LICENSE" "$dir/LICENSE.react"

cd "$dir"
sha256sum graphiql.min.js graphiql.min.css react.production.min.js react-dom.production.min.js \
	LICENSE.graphiql LICENSE.react
