//go:build !unix && !windows

package sqlite

import "os"

// tryLock does nothing where the platform has no file locks: keep one process per data_dir.
func tryLock(*os.File) error { return nil }
