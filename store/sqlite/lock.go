package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrLocked is in the chain of Open's error when another process (a running Caddy) holds the
// data directory; tryLock returns it.
var ErrLocked = errors.New("locked")

// lockDir takes the exclusive lock of dir's lock file, which the returned file holds until it is
// closed (or the process ends, however it ends). A second process, or a second store of the same
// directory in this process, fails here instead of sharing the database behind the first's back.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := tryLock(f); err != nil {
		f.Close()
		if errors.Is(err, ErrLocked) {
			return nil, fmt.Errorf("%s is %w: another process (or another store in this one) serves the data_dir %s; "+
				"give each Caddy its own data_dir, or use mongodb_uri to share posts between instances", path, ErrLocked, dir)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// refuseFerretDBFiles fails when dir holds the files of the embedded store of earlier releases
// (FerretDB on SQLite: one <database>.sqlite per database), which this store does not read. It
// changes nothing there.
func refuseFerretDBFiles(dir string) error {
	old, err := ferretDBFiles(dir)
	if err != nil || len(old) == 0 {
		return err
	}
	return fmt.Errorf("the data_dir %s holds %s, the files of the FerretDB-based embedded store of earlier releases of caddy-posts, "+
		"which this release does not read (it keeps posts in %s); nothing was changed. "+
		"To bring their posts over, run: caddy posts-import-ferretdb --data_dir %s; "+
		"to start afresh instead, move those files out of the directory",
		dir, strings.Join(old, ", "), DatabaseFile, dir)
}

// ferretDBFiles lists the FerretDB database files in dir, by name.
func ferretDBFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".sqlite") {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}
