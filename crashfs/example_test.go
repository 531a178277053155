package crashfs_test

import (
	"fmt"
	"os"

	"narad.dev/consume/crashfs"
)

// Written data survives a process crash but not a power cut until it is synced.
func Example() {
	fsys := crashfs.New()
	fsys.MkdirAll("/p")
	root, _ := fsys.OpenRoot("/p")
	f, _ := root.OpenFile("state", os.O_RDWR|os.O_CREATE, 0o644)
	root.Sync() // the new directory entry is durable
	f.WriteAt([]byte("synced"), 0)
	f.SyncData()
	f.WriteAt([]byte("cached"), 0)

	afterCrash := fsys.ProcessCrash()
	data, _ := afterCrash.ReadFile("/p/state")
	fmt.Println(string(data))

	afterPowerCut := afterCrash.PowerCut(crashfs.PowerCut{})
	data, _ = afterPowerCut.ReadFile("/p/state")
	fmt.Println(string(data))
	// Output:
	// cached
	// synced
}
