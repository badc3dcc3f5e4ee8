package errcode_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/internal/docgen"
)

// column is one column of a table of docs/errors.md: its title, and its cell for a row.
type column struct {
	title string
	cell  func(errcode.Code) string
}

// none is the cell of an interface that never shows the row.
const none = "—"

var (
	statusColumn  = column{"HTTP status", func(c errcode.Code) string { return number(c.Status) }}
	graphQLColumn = column{"GraphQL code", func(c errcode.Code) string {
		if c.GraphQL == "" {
			return none
		}
		return "`" + c.GraphQL + "`"
	}}
	closeColumn = column{"close code", func(c errcode.Code) string { return number(c.Close) }}
	// A | in a When would end its cell.
	whenColumn = column{"when", func(c errcode.Code) string { return strings.ReplaceAll(c.When, "|", `\|`) }}
)

func number(n int) string {
	if n == 0 {
		return none
	}
	return strconv.Itoa(n)
}

// The tables of docs/errors.md are made from errcode.Table, one per interface, each row with the
// other interfaces' codes and its When, so that what a client is told cannot drift from what the
// server sends. Rows that share a code are listed each, in the table's order.
func TestTheErrorsPageListsEveryRowOfTheTable(t *testing.T) {
	for _, tt := range []struct {
		section string // the heading of docs/errors.md the region sits under
		shows   func(errcode.Code) bool
		columns []column
	}{
		{"HTTP statuses", func(c errcode.Code) bool { return c.Status != 0 }, []column{statusColumn, graphQLColumn, closeColumn, whenColumn}},
		{"GraphQL codes", func(c errcode.Code) bool { return c.GraphQL != "" }, []column{graphQLColumn, statusColumn, closeColumn, whenColumn}},
		{"WebSocket close codes", func(c errcode.Code) bool { return c.Close != 0 }, []column{closeColumn, graphQLColumn, statusColumn, whenColumn}},
	} {
		t.Run("the "+tt.section, func(t *testing.T) {
			var rows [][]string
			for _, c := range errcode.Table {
				if !tt.shows(c) {
					continue
				}
				var cells []string
				for _, col := range tt.columns {
					cells = append(cells, col.cell(c))
				}
				rows = append(rows, cells)
			}
			// Sorted by their cells, column after column, so that the order of Table does not
			// matter. Cells compare as text: every status has 3 digits and every close code 4
			// (TestEveryRowOfTheTableIsWellFormed), and none sorts after them.
			slices.SortFunc(rows, slices.Compare)
			var titles, rules []string
			for _, col := range tt.columns {
				titles, rules = append(titles, col.title), append(rules, "---")
			}
			var b strings.Builder
			for _, cells := range append([][]string{titles, rules}, rows...) {
				b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
			}
			docgen.Region(t, "../docs/errors.md", "errcode ("+tt.section+")", "./errcode/", b.String())
		})
	}
}
