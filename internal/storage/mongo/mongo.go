// Package mongo is the hot-store sink: the latest copy of every record, one document per
// item key, for downstream processors to query and claim.
//
// Layout: database `trawler` (Config.Database), collection `<site>_<task>` (the item's
// biz with `.` replaced by `_`), `_id` = DocID(tenant, key) (the bare key for the default
// tenant, "@:key" for its keys that start with "@", "@tenant:key" for another), fields `id, biz, url, ts, hash, flag, chain, run_id,
// tenant, data`. Records are per tenant, like dedup and history: two tenants crawling the
// same task keep two documents, and each tenant's processors claim only its records. Write upserts (one bulk write per collection,
// unordered): a new key is inserted with `flag: 0`; an existing one gets the fields of
// the latest copy and keeps its `flag`, so re-crawling a record never hands it out
// again. Writing the same batch twice (a retried activity) leaves one document per key.
//
// Processing state: `flag` 0 = new, 1 = claimed. Claim flips up to n records of one
// tenant from 0 to 1 with findAndModify and returns them, so two processors never
// receive the same record.
//
// Retention: a TTL index on `ts` deletes records Config.Retention after their last fetch
// (default 30 days). A server without TTL indexes (FerretDB, the embedded server of
// `trawler dev`, reports itself in buildInfo and rejects the index option) gets the same
// retention from a sweeper in every sink: each Config.SweepEvery it deletes the records
// whose `ts` is older than now − Retention.
//
// On FerretDB, findAndModify reads and then writes, without atomicity between the two,
// so the sink serializes claims on one collection with a lease held in the
// `_claim_locks` collection (an insert with a unique `_id` is atomic there). MongoDB
// needs no lock. On FerretDB an upsert that races a claim of the same record may also
// reset its flag to 0, and the record is handed out again later: processors there get
// at least once, not exactly once.
package mongo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"github.com/trawlerhq/trawler/crawl"
	"github.com/trawlerhq/trawler/internal/storage"
)

// Config configures the sink.
type Config struct {
	URI      string // mongodb://…
	Database string // default "trawler"
	// Retention is how long a record stays after its last fetch (default 30 days).
	Retention time.Duration
	// SweepEvery is how often the sweeper deletes expired records on a server without
	// TTL indexes (default 1 minute).
	SweepEvery time.Duration
	Log        *slog.Logger
}

// LocksCollection holds the claim leases on servers whose findAndModify is not atomic.
const LocksCollection = "_claim_locks"

// claimLease is how long a claim lock protects a collection if its holder dies.
const claimLease = 30 * time.Second

// Sink upserts items into MongoDB.
type Sink struct {
	cfg    Config
	client *mongo.Client
	db     *mongo.Database

	mu       sync.Mutex
	ready    map[string]bool // collections whose indexes exist
	detected bool
	noTTL    bool // the server has no TTL indexes: sweep

	quit chan struct{}
	done chan struct{}
}

// Collection is the collection items of one biz (site.task) go to.
func Collection(biz string) string { return strings.ReplaceAll(biz, ".", "_") }

// DocID is the _id of tenant's record key: storage.TenantKey, so no key of one tenant
// (however a site spells it) is the _id of another's record. The default tenant ("" or
// "default") keeps the bare key, bar keys starting with "@", because every document
// written before the hot store was per tenant has it as _id and belongs to that tenant:
// its records stay where they are, keep their flag and are not written again as
// duplicates.
func DocID(tenant, key string) string { return storage.TenantKey(tenant, key) }

// tenantFilter selects the records of tenant. The default tenant's also match documents
// whose tenant is empty or missing: items that named no tenant were stored that way.
func tenantFilter(tenant string) bson.E {
	if crawl.IsDefaultTenant(tenant) {
		return bson.E{Key: "tenant", Value: bson.D{{Key: "$in", Value: bson.A{crawl.DefaultTenant, "", nil}}}}
	}
	return bson.E{Key: "tenant", Value: tenant}
}

// Open returns a sink for the server at cfg.URI and starts its sweeper. It does not wait
// for the server: the first Write does, and a server that is down fails that Write (and
// Temporal retries the batch).
func Open(cfg Config) (*Sink, error) {
	if cfg.URI == "" {
		return nil, errors.New("mongo sink: no server configured (--mongo mongodb://HOST:PORT)")
	}
	if cfg.Database == "" {
		cfg.Database = "trawler"
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 30 * 24 * time.Hour
	}
	if cfg.SweepEvery <= 0 {
		cfg.SweepEvery = time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	client, err := mongo.Connect(context.Background(), clientOptions(cfg.URI))
	if err != nil {
		return nil, fmt.Errorf("mongo sink: %s: %w", crawl.RedactURL(cfg.URI), err)
	}
	s := &Sink{cfg: cfg, client: client, db: client.Database(cfg.Database), ready: map[string]bool{},
		quit: make(chan struct{}), done: make(chan struct{})}
	go s.sweeper()
	return s, nil
}

// Name implements storage.Sink.
func (s *Sink) Name() string { return "mongo" }

// Database is the database the sink writes to.
func (s *Sink) Database() *mongo.Database { return s.db }

// Write implements storage.Sink: one unordered bulk upsert per collection; it returns
// when the server acknowledged every write (write concern majority unless the URI sets
// another).
func (s *Sink) Write(ctx context.Context, items []crawl.Item) error {
	byColl := map[string][]mongo.WriteModel{}
	for _, it := range items {
		name := Collection(it.Biz)
		// An update of "many" by _id matches at most one document, exactly like an update
		// of one; FerretDB, though, keeps a SQLite connection per matched update-one
		// statement until the whole command ends, which starves its pool (100
		// connections) on a bulk write of a few hundred existing records.
		byColl[name] = append(byColl[name], mongo.NewUpdateManyModel().
			SetFilter(bson.D{{Key: "_id", Value: DocID(it.Tenant, it.Key)}}).
			SetUpdate(bson.D{
				{Key: "$set", Value: bson.D{
					{Key: "id", Value: it.ID}, {Key: "biz", Value: it.Biz}, {Key: "url", Value: it.URL},
					{Key: "ts", Value: it.TS}, {Key: "hash", Value: it.Hash}, {Key: "chain", Value: it.Chain},
					{Key: "run_id", Value: it.RunID}, {Key: "tenant", Value: it.Tenant}, {Key: "data", Value: it.Data},
				}},
				{Key: "$setOnInsert", Value: bson.D{{Key: "flag", Value: 0}}}, // new; a claim sets 1
			}).
			SetUpsert(true))
	}
	names := make([]string, 0, len(byColl))
	for n := range byColl {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := s.ensure(ctx, name); err != nil {
			return err
		}
		models := byColl[name]
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			_, err = s.db.Collection(name).BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
			// Two writers upserting one new key at once: one insert loses with a
			// duplicate key error; upserting again updates the winner's document.
			if err == nil || !onlyDuplicateKeys(err) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("mongo sink: upsert %d records into %s.%s: %w", len(models), s.cfg.Database, name, err)
		}
	}
	return nil
}

func onlyDuplicateKeys(err error) bool {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil || len(bwe.WriteErrors) == 0 {
		return false
	}
	for _, we := range bwe.WriteErrors {
		if we.Code != 11000 {
			return false
		}
	}
	return true
}

// ensure creates a collection's missing indexes once per process: biz, (flag, ts) for
// claims, and ts — a TTL index where the server has them. Indexes are created one at a
// time and only when missing (FerretDB v1.24 drops the connection on a createIndexes
// of several indexes that all exist).
func (s *Sink) ensure(ctx context.Context, name string) error {
	s.mu.Lock()
	ok := s.ready[name]
	s.mu.Unlock()
	if ok {
		return nil
	}
	noTTL, err := s.detect(ctx)
	if err != nil {
		return err
	}
	idx := s.db.Collection(name).Indexes()
	specs, err := idx.ListSpecifications(ctx)
	if err != nil && !hasCode(err, 26) { // 26: the collection does not exist yet
		return fmt.Errorf("mongo sink: list indexes of %s.%s: %w", s.cfg.Database, name, err)
	}
	have := map[string]*mongo.IndexSpecification{}
	for _, sp := range specs {
		have[sp.Name] = sp
	}
	for _, m := range []mongo.IndexModel{
		{Keys: bson.D{{Key: "biz", Value: 1}}, Options: options.Index().SetName("biz_1")},
		{Keys: bson.D{{Key: "flag", Value: 1}, {Key: "ts", Value: 1}}, Options: options.Index().SetName("flag_1_ts_1")},
	} {
		if have[*m.Options.Name] != nil {
			continue
		}
		if _, err := idx.CreateOne(ctx, m); err != nil {
			return fmt.Errorf("mongo sink: create index %s of %s.%s: %w", *m.Options.Name, s.cfg.Database, name, err)
		}
	}
	want := int32(s.cfg.Retention / time.Second)
	ts := have["ts_1"]
	if !noTTL {
		switch {
		case ts == nil:
			_, err := idx.CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "ts", Value: 1}}, Options: options.Index().SetName("ts_1").SetExpireAfterSeconds(want)})
			switch {
			case err == nil:
			case hasCode(err, 238) || strings.Contains(err.Error(), "expireAfterSeconds"): // not implemented
				s.mu.Lock()
				s.noTTL = true
				s.mu.Unlock()
				s.cfg.Log.Info("mongo sink: the server has no TTL indexes; sweeping expired records instead", "retention", s.cfg.Retention, "every", s.cfg.SweepEvery)
				noTTL = true
			default:
				return fmt.Errorf("mongo sink: create the TTL index on %s.%s.ts: %w", s.cfg.Database, name, err)
			}
		case ts.ExpireAfterSeconds == nil || *ts.ExpireAfterSeconds != want: // another retention
			err := s.db.RunCommand(ctx, bson.D{{Key: "collMod", Value: name}, {Key: "index", Value: bson.D{
				{Key: "keyPattern", Value: bson.D{{Key: "ts", Value: 1}}},
				{Key: "expireAfterSeconds", Value: int64(want)},
			}}}).Err()
			if err != nil {
				return fmt.Errorf("mongo sink: set the retention of index ts_1 of %s.%s to %s: %w", s.cfg.Database, name, s.cfg.Retention, err)
			}
		}
	}
	if noTTL && have["ts_1"] == nil {
		if _, err := idx.CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "ts", Value: 1}}, Options: options.Index().SetName("ts_1")}); err != nil {
			return fmt.Errorf("mongo sink: create index ts_1 of %s.%s: %w", s.cfg.Database, name, err)
		}
	}
	s.mu.Lock()
	s.ready[name] = true
	s.mu.Unlock()
	return nil
}

func hasCode(err error, codes ...int) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	for _, c := range codes {
		if se.HasErrorCode(c) {
			return true
		}
	}
	return false
}

// detect asks the server once whether it is FerretDB (no TTL indexes, no atomic
// findAndModify). It reports whether the sink must sweep.
func (s *Sink) detect(ctx context.Context) (noTTL bool, err error) {
	s.mu.Lock()
	if s.detected {
		defer s.mu.Unlock()
		return s.noTTL, nil
	}
	s.mu.Unlock()
	var info bson.M
	if err := s.client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		return false, fmt.Errorf("mongo sink: %s: %w", crawl.RedactURL(s.cfg.URI), err)
	}
	_, ferret := info["ferretdbVersion"]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detected = true
	s.noTTL = s.noTTL || ferret
	return s.noTTL, nil
}

// Embedded reports whether the server is FerretDB (or another server without TTL
// indexes), where the sink sweeps and serializes claims.
func (s *Sink) Embedded(ctx context.Context) (bool, error) { return s.detect(ctx) }

// collections lists the item collections of the database.
func (s *Sink) collections(ctx context.Context) ([]string, error) { return itemCollections(ctx, s.db) }

// itemCollections lists the item collections of a database.
func itemCollections(ctx context.Context, db *mongo.Database) ([]string, error) {
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("mongo sink: list collections of %s: %w", db.Name(), err)
	}
	out := names[:0]
	for _, n := range names {
		if !strings.HasPrefix(n, "_") && !strings.HasPrefix(n, "system.") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Count implements storage.Sink: documents of the run across the trawler collections.
func (s *Sink) Count(ctx context.Context, runID string) (int, error) {
	names, err := s.collections(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, n := range names {
		c, err := s.db.Collection(n).CountDocuments(ctx, bson.D{{Key: "run_id", Value: runID}})
		if err != nil {
			return 0, fmt.Errorf("mongo sink: count %s.%s: %w", s.cfg.Database, n, err)
		}
		total += int(c)
	}
	return total, nil
}

// record is a stored document.
type record struct {
	DocID  string         `bson:"_id"`
	ID     int64          `bson:"id"`
	Biz    string         `bson:"biz"`
	URL    string         `bson:"url"`
	TS     time.Time      `bson:"ts"`
	Hash   string         `bson:"hash"`
	Flag   int            `bson:"flag"`
	Chain  string         `bson:"chain"`
	RunID  string         `bson:"run_id"`
	Tenant string         `bson:"tenant"`
	Data   map[string]any `bson:"data"`
}

// key is the item key of the record: its _id without the tenant DocID added.
func (r record) key() string {
	_, key := storage.SplitTenantKey(r.DocID)
	return key
}

func (r record) item() crawl.Item {
	return crawl.Item{ID: r.ID, Biz: r.Biz, Key: r.key(), URL: r.URL, TS: r.TS.UTC(), Hash: r.Hash, Flag: r.Flag,
		Chain: r.Chain, RunID: r.RunID, Tenant: r.Tenant, Data: r.Data}
}

// Find returns the stored records of a biz matching filter (bson), for tests and tools.
func (s *Sink) Find(ctx context.Context, biz string, filter any) ([]crawl.Item, error) {
	cur, err := s.db.Collection(Collection(biz)).Find(ctx, filter)
	if err != nil {
		return nil, err
	}
	var recs []record
	if err := cur.All(ctx, &recs); err != nil {
		return nil, err
	}
	out := make([]crawl.Item, len(recs))
	for i, r := range recs {
		out[i] = r.item()
	}
	return out, nil
}

// Claim flips up to n of tenant's records of a biz from flag 0 (new) to 1 (claimed),
// oldest fetch first, and returns them with flag 1. On MongoDB each record is claimed
// with one findAndModify filtered on flag 0, so concurrent claimers never receive the
// same record. Another tenant's records of the biz are left for its own processors.
func (s *Sink) Claim(ctx context.Context, tenant, biz string, n int) ([]crawl.Item, error) {
	if n <= 0 {
		return nil, nil
	}
	name := Collection(biz)
	serialize, err := s.detect(ctx)
	if err != nil {
		return nil, err
	}
	coll := s.db.Collection(name)
	if serialize {
		unlock, err := s.lock(ctx, name)
		if err != nil {
			return nil, err
		}
		defer unlock()
		return s.claimLocked(ctx, coll, tenant, n)
	}
	filter := bson.D{{Key: "flag", Value: 0}, tenantFilter(tenant)}
	opts := options.FindOneAndUpdate().SetSort(bson.D{{Key: "ts", Value: 1}}).SetReturnDocument(options.After)
	var out []crawl.Item
	for len(out) < n {
		var r record
		err := coll.FindOneAndUpdate(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "flag", Value: 1}}}}, opts).Decode(&r)
		if errors.Is(err, mongo.ErrNoDocuments) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("mongo sink: claim from %s.%s (%d claimed so far): %w", s.cfg.Database, coll.Name(), len(out), err)
		}
		out = append(out, r.item())
	}
	return out, nil
}

// claimLocked claims while holding the collection's claim lock (FerretDB): one query
// picks the candidates, then a findAndModify by _id (the only filter FerretDB answers
// from an index) flips each one. Nothing else flips a flag to 1 meanwhile, so a
// candidate still at flag 0 in the returned pre-image is ours.
func (s *Sink) claimLocked(ctx context.Context, coll *mongo.Collection, tenant string, n int) ([]crawl.Item, error) {
	cur, err := coll.Find(ctx, bson.D{{Key: "flag", Value: 0}, tenantFilter(tenant)},
		options.Find().SetSort(bson.D{{Key: "ts", Value: 1}}).SetLimit(int64(n)).SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("mongo sink: claim from %s.%s: %w", s.cfg.Database, coll.Name(), err)
	}
	var cands []struct {
		DocID string `bson:"_id"`
	}
	if err := cur.All(ctx, &cands); err != nil {
		return nil, fmt.Errorf("mongo sink: claim from %s.%s: %w", s.cfg.Database, coll.Name(), err)
	}
	opts := options.FindOneAndUpdate().SetReturnDocument(options.Before)
	var out []crawl.Item
	for _, c := range cands {
		var r record
		err := coll.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: c.DocID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "flag", Value: 1}}}}, opts).Decode(&r)
		if errors.Is(err, mongo.ErrNoDocuments) { // swept meanwhile
			continue
		}
		if err != nil {
			return out, fmt.Errorf("mongo sink: claim from %s.%s (%d claimed so far): %w", s.cfg.Database, coll.Name(), len(out), err)
		}
		if r.Flag != 0 {
			continue
		}
		r.Flag = 1
		out = append(out, r.item())
	}
	return out, nil
}

// lock takes the claim lease of a collection: lease documents `<coll>:<generation>` in
// LocksCollection, where inserting the next generation (a unique _id) is the atomic
// step. A generation is free once released or past its lease.
func (s *Sink) lock(ctx context.Context, name string) (unlock func(), err error) {
	locks := s.db.Collection(LocksCollection)
	type lease struct {
		ID       string    `bson:"_id"`
		Gen      int64     `bson:"gen"`
		Until    time.Time `bson:"until"`
		Released bool      `bson:"released"`
	}
	key := func(gen int64) string { return fmt.Sprintf("%s:%019d", name, gen) }
	for {
		var cur lease
		err := locks.FindOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: name + ":"}, {Key: "$lt", Value: name + ";"}}}},
			options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}})).Decode(&cur)
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return nil, fmt.Errorf("mongo sink: claim lock of %s: %w", name, err)
		}
		if err == nil && !cur.Released && time.Now().Before(cur.Until) {
			select { // held: wait a little
			case <-ctx.Done():
				return nil, fmt.Errorf("mongo sink: waiting for the claim lock of %s: %w", name, ctx.Err())
			case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
			}
			continue
		}
		next := lease{ID: key(cur.Gen + 1), Gen: cur.Gen + 1, Until: time.Now().Add(claimLease)}
		if _, err := locks.InsertOne(ctx, next); err != nil {
			if mongo.IsDuplicateKeyError(err) { // another claimer took this generation
				continue
			}
			return nil, fmt.Errorf("mongo sink: claim lock of %s: %w", name, err)
		}
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _ = locks.UpdateOne(ctx, bson.D{{Key: "_id", Value: next.ID}}, bson.D{{Key: "$set", Value: bson.D{{Key: "released", Value: true}}}})
			if next.Gen > 10 { // keep the collection small
				_, _ = locks.DeleteMany(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: name + ":"}, {Key: "$lt", Value: key(next.Gen - 10)}}}})
			}
		}, nil
	}
}

// Sweep deletes, in every item collection, the records fetched longer than the
// retention ago, and returns how many. The sweeper calls it on servers without TTL
// indexes; it is safe to call anywhere.
func (s *Sink) Sweep(ctx context.Context) (int64, error) {
	names, err := s.collections(ctx)
	if err != nil {
		return 0, err
	}
	cutoff := time.Now().Add(-s.cfg.Retention)
	var total int64
	for _, n := range names {
		res, err := s.db.Collection(n).DeleteMany(ctx, bson.D{{Key: "ts", Value: bson.D{{Key: "$lt", Value: cutoff}}}})
		if err != nil {
			return total, fmt.Errorf("mongo sink: sweep %s.%s: %w", s.cfg.Database, n, err)
		}
		total += res.DeletedCount
	}
	return total, nil
}

func (s *Sink) sweeper() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.SweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(s.cfg.SweepEvery, 30*time.Second))
		noTTL, err := s.detect(ctx)
		if err == nil && noTTL {
			var n int64
			if n, err = s.Sweep(ctx); n > 0 {
				s.cfg.Log.Info("mongo sink: swept expired records", "deleted", n, "retention", s.cfg.Retention)
			}
		}
		cancel()
		if err != nil {
			s.cfg.Log.Warn("mongo sink: sweep", "err", err)
		}
	}
}

// Close implements storage.Sink: it stops the sweeper and disconnects.
func (s *Sink) Close() error {
	select {
	case <-s.quit:
		return nil
	default:
	}
	close(s.quit)
	<-s.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.client.Disconnect(ctx)
}
