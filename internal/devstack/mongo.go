package devstack

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", for the _id indexes
)

// StartMongo starts an embedded MongoDB-compatible server (FerretDB v1 with its SQLite
// handler) in this process, on a free loopback port, with one SQLite file per database
// under <dataDir>/ferretdb/. It returns the mongodb:// URI clients connect to. stop closes
// the listener, gives connected clients up to 3 s to hang up, then closes the files.
//
// FerretDB speaks the MongoDB wire protocol but is not MongoDB: it has no TTL indexes
// (the mongo sink detects it and sweeps instead), its findAndModify is not atomic (the
// sink serializes claims there), and only lookups by _id use an index. FerretDB v1.24
// indexes `_id` with an expression its own queries do not match, so every lookup by _id
// would scan its table; StartMongo adds the matching index to each new collection table
// (within a quarter of a second of its creation), which keeps upserts by _id fast.
func StartMongo(dataDir string) (uri string, stop func() error, err error) {
	return StartMongoOn(dataDir, "127.0.0.1:0")
}

// StartMongoOn is StartMongo listening on addr (host:port), for restarting the server
// where its clients expect it.
func StartMongoOn(dataDir, addr string) (uri string, stop func() error, err error) {
	if dataDir == "" {
		return "", nil, errors.New("devstack: StartMongo: empty data directory")
	}
	dir, err := filepath.Abs(filepath.Join(dataDir, "ferretdb"))
	if err != nil {
		return "", nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("devstack: create %s: %w", dir, err)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener: ferretdb.ListenerConfig{TCP: addr},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler:  "sqlite",
		// WAL (FerretDB's default) with synchronous=NORMAL: a killed process loses
		// nothing; a power cut may lose the last transactions, as with any dev server.
		SQLiteURL: "file:" + dir + "/?_pragma=synchronous(normal)",
	})
	if err != nil {
		return "", nil, fmt.Errorf("devstack: start the embedded MongoDB (FerretDB, data in %s): %w", dir, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()
	ix := &idIndexer{dir: dir, dbs: map[string]*sql.DB{}}
	ixDone := make(chan struct{})
	go func() {
		defer close(ixDone)
		ix.run(ctx, 250*time.Millisecond)
	}()
	var once sync.Once
	stop = func() error {
		once.Do(func() {
			cancel()
			<-ixDone
			ix.close()
			<-done
		})
		return nil
	}
	return f.MongoDBURI(), stop, nil
}

// idIndexer gives every FerretDB collection table an index on `_ferretdb_sjson->'$._id'`,
// the expression FerretDB's queries and updates filter on.
type idIndexer struct {
	dir string
	dbs map[string]*sql.DB // database file → handle
}

func (x *idIndexer) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		x.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (x *idIndexer) pass(ctx context.Context) {
	files, _ := filepath.Glob(filepath.Join(x.dir, "*.sqlite"))
	for _, file := range files {
		db, ok := x.dbs[file]
		if !ok {
			var err error
			if db, err = sql.Open("sqlite", "file:"+file+"?_pragma=busy_timeout(10000)"); err != nil {
				continue
			}
			db.SetMaxOpenConns(1)
			x.dbs[file] = db
		}
		missing, err := tablesWithoutIDIndex(ctx, db)
		if err != nil {
			continue
		}
		for _, t := range missing {
			_, _ = db.ExecContext(ctx, fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (_ferretdb_sjson->'$._id')`, t+"_trawler_id", t))
		}
	}
}

func tablesWithoutIDIndex(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT t.name FROM sqlite_master t
		WHERE t.type = 'table' AND t.name NOT LIKE '\_ferretdb\_%' ESCAPE '\'
		AND NOT EXISTS (SELECT 1 FROM sqlite_master i WHERE i.type = 'index' AND i.name = t.name || '_trawler_id')`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(name, "sqlite_") {
			out = append(out, name)
		}
	}
	return out, rows.Err()
}

func (x *idIndexer) close() {
	for _, db := range x.dbs {
		_ = db.Close()
	}
}
