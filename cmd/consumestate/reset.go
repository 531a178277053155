package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"narad.dev/consume/router"
)

// resetResult is what reset prints.
type resetResult struct {
	Partition  partitionReport `json:"partition"`
	SetAsideTo string          `json:"set_aside_to"`
	Done       bool            `json:"done"` // false: a dry run without -confirm, nothing written
	NextStart  string          `json:"next_start"`
}

// resetNextStart is what a partition's next start does once its directory is set aside.
const resetNextStart = "the node finds no state for the partition: at its next load it creates the directory, draws a fresh " +
	"incarnation and starts at the log's oldest retained offset, so every retained record is delivered again " +
	"(acked ones included), with attempts counted afresh and the quarantine forgotten (quarantined and requeued " +
	"records are delivered like the rest). The set-aside directory is never read; remove it once it is not needed " +
	"(a DeleteTopic removes it with the topic's directory)"

// reset sets a partition's directory aside: args are DIR TOPIC PARTITION. Without confirm it
// writes nothing.
func (t *tool) reset(args []string, confirm, asJSON bool) int {
	dir, topic := args[0], args[1]
	part, err := parsePartition(args[2])
	if err != nil {
		return t.fail("%v", err)
	}
	ref, err := resolve(dir, topic, part)
	if err != nil {
		return t.fail("nothing to reset: %v", err)
	}
	p := inspectPartition(ref)
	if p.Verdict == verdictMoved {
		return t.fail("%s/%d was handed off from this node (its directory holds %s): resetting it would have this node serve it "+
			"from the start beside its new owner. Adopt it back, or DropPartition it once the routes no longer name it here",
			quote(topic), part, router.MovedFile)
	}
	p.NextStart = "" // what it would be without the reset: reset says what it is with it
	res := resetResult{Partition: p, NextStart: resetNextStart,
		SetAsideTo: filepath.Join(filepath.Dir(ref.path), strconv.Itoa(int(part))+".reset-"+t.now().UTC().Format(resetTimeLayout))}
	if confirm {
		if err := setAside(dir, ref.path, res.SetAsideTo); err != nil {
			if errors.Is(err, router.ErrDirLocked) {
				return t.fail("not reset: a node holds %s (%v); stop it first: a reset under a running node would strand the partition", dir, err)
			}
			return t.fail("not reset: %v", err)
		}
		res.Done = true
	}
	if asJSON {
		res.Partition.Decoded = nil
		return t.printJSON(res)
	}
	w := t.stdout
	t.printVerify(&res.Partition)
	if res.Done {
		fmt.Fprintf(w, "\nReset: %s was renamed to %s, and the topic's directory synced.\n", ref.path, res.SetAsideTo)
	} else {
		fmt.Fprintf(w, "\nDry run, nothing written: with -confirm, and while no node holds %s, %s would be renamed to %s.\n",
			dir, ref.path, res.SetAsideTo)
	}
	fmt.Fprintf(w, "Next start: %s.\n", res.NextStart)
	return exitOK
}

// setAside renames the partition's directory from to to, under the node's lock on the state
// directory, and syncs the directory holding both names so the rename survives a power loss.
func setAside(stateDir, from, to string) (err error) {
	unlock, err := router.LockDir(stateDir)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := unlock(); err == nil && uerr != nil {
			err = fmt.Errorf("release the lock: %w", uerr)
		}
	}()
	if _, err := os.Lstat(from); err != nil {
		return fmt.Errorf("%s is gone: %w", from, err) // a file there is set aside too: the node cannot use it
	}
	if _, err := os.Lstat(filepath.Join(from, router.MovedFile)); err == nil {
		return fmt.Errorf("%s was handed off meanwhile (it holds %s)", from, router.MovedFile)
	}
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("%s exists already", to)
	}
	if err := os.Rename(from, to); err != nil {
		return err
	}
	return syncDir(filepath.Dir(to))
}

// syncDir makes a directory's entries durable; Windows has no such call (and needs none).
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("the partition was renamed, but syncing %s failed (a power loss may undo the rename): %w", dir, err)
	}
	return nil
}
