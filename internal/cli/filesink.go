package cli

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/trawlerhq/trawler/internal/engine"
	"github.com/trawlerhq/trawler/internal/storage/file"
)

// fileSinkFlags configure a worker's file sink (store: [file]); each falls back to its
// TRAWLER_FILE_* variable.
type fileSinkFlags struct {
	dir, format, rotateSize, rotateEvery string
}

func (f *fileSinkFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "file-dir", "", "directory `DIR` of the file sink: rotated files per task under DIR/<site.task>/ (none: no file sink) [TRAWLER_FILE_DIR]")
	fl.StringVar(&f.format, "file-format", "", "format of the file sink's files: jsonl (default), csv or parquet [TRAWLER_FILE_FORMAT]")
	fl.StringVar(&f.rotateSize, "file-rotate-size", "", "start a new file once one holds `SIZE` (bytes, or 500KB, 100MB, 1GB; default no limit) [TRAWLER_FILE_ROTATE_SIZE]")
	fl.StringVar(&f.rotateEvery, "file-rotate-every", "", "start a new file once one is `DURATION` old (1h, 15m; default no limit) [TRAWLER_FILE_ROTATE_EVERY]")
}

// options resolves the flags (then the environment) into the sink's settings.
func (f *fileSinkFlags) options() (engine.FileOptions, error) {
	env := func(v, name string) string {
		if v != "" {
			return v
		}
		return strings.TrimSpace(os.Getenv(name))
	}
	o := engine.FileOptions{Dir: env(f.dir, "TRAWLER_FILE_DIR")}
	format := env(f.format, "TRAWLER_FILE_FORMAT")
	size := env(f.rotateSize, "TRAWLER_FILE_ROTATE_SIZE")
	every := env(f.rotateEvery, "TRAWLER_FILE_ROTATE_EVERY")
	if o.Dir == "" {
		if format != "" || size != "" || every != "" {
			return o, fmt.Errorf("--file-format, --file-rotate-size and --file-rotate-every configure the file sink: also pass --file-dir DIR (or TRAWLER_FILE_DIR)")
		}
		return o, nil
	}
	if format != "" {
		ff, err := file.ParseFormat(format)
		if err != nil {
			return o, fmt.Errorf("--file-format: %w", err)
		}
		o.Format = string(ff)
	}
	n, err := parseSize(size)
	if err != nil {
		return o, fmt.Errorf("--file-rotate-size: %w", err)
	}
	o.RotateSize = n
	if every != "" {
		d, err := time.ParseDuration(every)
		if err != nil || d < 0 {
			return o, fmt.Errorf("--file-rotate-every %q: give a duration such as 1h or 15m", every)
		}
		o.RotateEvery = d
	}
	return o, nil
}

// fileLine says where the file sink writes, for the worker's start-up message.
func fileLine(o engine.FileOptions) string {
	if o.Dir == "" {
		return ""
	}
	line := fmt.Sprintf(", file %s (%s", o.Dir, cmpOr(o.Format, "jsonl"))
	if o.RotateSize > 0 {
		line += ", new file every " + humanBytes(o.RotateSize)
	}
	if o.RotateEvery > 0 {
		line += ", every " + o.RotateEvery.String()
	}
	return line + ")"
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
