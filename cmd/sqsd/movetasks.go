package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"narad.dev/consume/router/sqsapi"
)

// moveTasksName is the message move tasks' file in the data directory; moveTasksTemp is
// where a new version is written before it replaces the old.
const (
	moveTasksName = "movetasks.json"
	moveTasksTemp = "movetasks.json.tmp"
)

// moveTasksMagic begins the file's first line, followed by the CRC-32C of the rest of the
// file (the JSON) in hex, as the catalogue's does.
const moveTasksMagic = "sqsd-movetasks v1 crc32c="

// errCorruptMoveTasks marks a move tasks file that cannot be read back: the server refuses
// to start rather than forget tasks it was running.
var errCorruptMoveTasks = errors.New("sqsd: message move tasks damaged")

// moveTaskFile is the front end's MoveTaskStore: the message move tasks in one file of the
// data directory, written whole on every save as the catalogue is (a temporary file
// fsynced and renamed over the old one, the directory fsynced), so that a crash leaves one
// save or the other. The front end saves one at a time, so nothing here locks.
type moveTaskFile struct {
	dir   string
	tasks []sqsapi.MoveTask // as read at start
}

var _ sqsapi.MoveTaskStore = (*moveTaskFile)(nil)

// openMoveTasks reads the move tasks of dir; none when there is no file yet. A file that is
// there and cannot be read is an error matching errCorruptMoveTasks, naming the file.
func openMoveTasks(dir string) (*moveTaskFile, error) {
	f := &moveTaskFile{dir: dir}
	path := filepath.Join(dir, moveTasksName)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return f, nil
	case err != nil:
		return nil, err
	}
	if f.tasks, err = decodeMoveTasks(data); err != nil {
		return nil, fmt.Errorf("%w: %s: %v (restore it from a backup, or move it away to start with no move tasks)", errCorruptMoveTasks, path, err)
	}
	return f, nil
}

func (f *moveTaskFile) MoveTasks() ([]sqsapi.MoveTask, error) { return f.tasks, nil }

func (f *moveTaskFile) SaveMoveTasks(tasks []sqsapi.MoveTask) error {
	data, err := encodeMoveTasks(tasks)
	if err != nil {
		return err
	}
	return writeFileAtomic(f.dir, moveTasksName, moveTasksTemp, data, 0o600)
}

// moveTasksFile is the file's JSON.
type moveTasksFile struct {
	Tasks []sqsapi.MoveTask `json:"tasks"`
}

// encodeMoveTasks is what decodeMoveTasks reads.
func encodeMoveTasks(tasks []sqsapi.MoveTask) ([]byte, error) {
	return encodeChecked(moveTasksMagic, moveTasksFile{Tasks: tasks})
}

// decodeMoveTasks checks and decodes a move tasks file.
func decodeMoveTasks(data []byte) ([]sqsapi.MoveTask, error) {
	var file moveTasksFile
	err := decodeChecked(moveTasksMagic, data, &file)
	return file.Tasks, err
}
