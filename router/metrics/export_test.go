package metrics

// HelpEntries is how many HELP entries the table holds, for the test that none is unused.
func HelpEntries() int { return len(help) }
