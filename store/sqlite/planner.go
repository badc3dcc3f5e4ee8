package sqlite

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"encoding/binary"
	"fmt"
	"reflect"

	"modernc.org/libc"
	driver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// openDB opens the pool of connections to dsn that a Store reads or writes through, each with
// SQLite's query planner stability guarantee on (stablePlans).
func openDB(dsn string) (*sql.DB, error) {
	base, err := driver.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(stableConnector{base}), nil
}

// stableConnector is a Connector whose connections have stablePlans done before their first
// statement.
type stableConnector struct{ sqldriver.Connector }

// Connect opens a connection of c's and has stablePlans turn the guarantee on.
func (c stableConnector) Connect(ctx context.Context) (sqldriver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := stablePlans(conn); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// stablePlans turns on SQLITE_DBCONFIG_ENABLE_QPSG on conn, a connection of modernc.org/sqlite,
// and checks that it is on. Without it, SQLite marks a statement to be compiled again when a
// value bound to it crosses between 0 or 1 and other integers (whereLoopOutputAdjust, since
// SQLite 3.49), and FTS5's statement that finds a word's page in a segment of the index
// (SELECT pgno FROM %_idx WHERE segid=? …) is one: its segid moves from 1 to the others and
// back in every search, so a search over three segments compiled it twice, a tenth of the
// CPU time of GET /posts?q=… at 200,000 posts. The guarantee keeps each statement's first plan;
// no statement of this package depends on a bound value for its plan. The driver has no option
// for it (as of v1.62.0), so this reads the connection's handle from its unexported fields,
// db and tls; a test (TestStablePlans) fails if a version of the driver moves them.
func stablePlans(conn sqldriver.Conn) error {
	v := reflect.ValueOf(conn)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return fmt.Errorf("sqlite: a connection of type %T has no handle to configure", conn)
	}
	db, tls := v.FieldByName("db"), v.FieldByName("tls")
	if db.Kind() != reflect.Uintptr || tls.Kind() != reflect.Pointer || tls.Type().Elem() != reflect.TypeFor[libc.TLS]() {
		return fmt.Errorf("sqlite: a connection of type %T has no handle to configure", conn)
	}
	t := (*libc.TLS)(tls.UnsafePointer())
	const slot = 8 // libc.VaList's size of each argument, an int or a pointer alike
	args := libc.Xmalloc(t, 2*slot+4)
	if args == 0 {
		return fmt.Errorf("sqlite: configuring a connection: out of memory")
	}
	defer libc.Xfree(t, args)
	on := args + 2*slot // the int the call writes the setting into
	rc := sqlite3.Xsqlite3_db_config(t, uintptr(db.Uint()), sqlite3.SQLITE_DBCONFIG_ENABLE_QPSG, libc.VaList(args, int32(1), on))
	if rc != sqlite3.SQLITE_OK || binary.NativeEndian.Uint32(libc.GoBytes(on, 4)) != 1 {
		return fmt.Errorf("sqlite: turning on the query planner stability guarantee failed (%d)", rc)
	}
	return nil
}
