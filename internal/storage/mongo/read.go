package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"go.mongodb.org/mongo-driver/mongo/writeconcern"

	"github.com/trawlerhq/trawler/crawl"
)

// ErrNoRecord is returned by Reader.Get when no record has the key.
var ErrNoRecord = errors.New("no such record")

// clientOptions are the driver options every client of the hot store uses.
func clientOptions(uri string) *options.ClientOptions {
	return options.Client().
		SetWriteConcern(writeconcern.Majority()). // unless the URI says otherwise
		ApplyURI(uri).
		SetAppName("trawler").
		SetServerSelectionTimeout(10 * time.Second).
		SetConnectTimeout(5 * time.Second).
		SetBSONOptions(&options.BSONOptions{DefaultDocumentM: true})
}

// Reader browses the hot store without writing to it or sweeping it: what the console
// uses to page through a task's records and show one.
type Reader struct {
	client *mongo.Client
	db     *mongo.Database
}

// OpenReader connects to the hot store at uri (database "trawler" when empty). Like
// Open, it does not wait for the server.
func OpenReader(uri, database string) (*Reader, error) {
	if database == "" {
		database = "trawler"
	}
	client, err := mongo.Connect(context.Background(), clientOptions(uri))
	if err != nil {
		return nil, fmt.Errorf("mongo: %s: %w", crawl.RedactURL(uri), err)
	}
	return &Reader{client: client, db: client.Database(database)}, nil
}

// Ping checks that the server answers.
func (r *Reader) Ping(ctx context.Context) error { return r.client.Ping(ctx, nil) }

// Close disconnects.
func (r *Reader) Close() error { return r.client.Disconnect(context.Background()) }

// BizCount is a task's collection and how many records it holds.
type BizCount struct {
	Biz   string `json:"biz"`
	Count int64  `json:"count"`
}

// tenantsFilter selects the records of tenants (every record for none), as
// tenantFilter selects one tenant's.
func tenantsFilter(tenants []string) bson.D {
	or := bson.A{}
	for _, t := range tenants {
		or = append(or, bson.D{tenantFilter(t)})
	}
	switch len(or) {
	case 0:
		return bson.D{}
	case 1:
		return or[0].(bson.D)
	}
	return bson.D{{Key: "$or", Value: or}}
}

// Bizes lists the tasks with records of tenants (every tenant for none) in the hot
// store, by biz.
func (r *Reader) Bizes(ctx context.Context, tenants []string) ([]BizCount, error) {
	names, err := itemCollections(ctx, r.db)
	if err != nil {
		return nil, err
	}
	var out []BizCount
	for _, n := range names {
		var one record
		err := r.db.Collection(n).FindOne(ctx, tenantsFilter(tenants)).Decode(&one)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("mongo: read %s.%s: %w", r.db.Name(), n, err)
		}
		c, err := r.db.Collection(n).CountDocuments(ctx, tenantsFilter(tenants))
		if err != nil {
			return nil, fmt.Errorf("mongo: count %s.%s: %w", r.db.Name(), n, err)
		}
		out = append(out, BizCount{Biz: one.Biz, Count: c})
	}
	return out, nil
}

// Page returns up to limit records of a biz of tenants (every tenant for none), latest
// fetch first, after skipping skip, and how many such records the biz holds.
func (r *Reader) Page(ctx context.Context, biz string, tenants []string, skip, limit int) ([]crawl.Item, int64, error) {
	coll := r.db.Collection(Collection(biz))
	total, err := coll.CountDocuments(ctx, tenantsFilter(tenants))
	if err != nil {
		return nil, 0, fmt.Errorf("mongo: count %s.%s: %w", r.db.Name(), coll.Name(), err)
	}
	cur, err := coll.Find(ctx, tenantsFilter(tenants), options.Find().
		SetSort(bson.D{{Key: "ts", Value: -1}, {Key: "_id", Value: 1}}).SetSkip(int64(skip)).SetLimit(int64(limit)))
	if err != nil {
		return nil, 0, fmt.Errorf("mongo: read %s.%s: %w", r.db.Name(), coll.Name(), err)
	}
	var recs []record
	if err := cur.All(ctx, &recs); err != nil {
		return nil, 0, fmt.Errorf("mongo: read %s.%s: %w", r.db.Name(), coll.Name(), err)
	}
	out := make([]crawl.Item, len(recs))
	for i, rec := range recs {
		out[i] = rec.item()
	}
	return out, total, nil
}

// Get returns tenant's record of a biz with the key, or ErrNoRecord.
func (r *Reader) Get(ctx context.Context, tenant, biz, key string) (crawl.Item, error) {
	var rec record
	err := r.db.Collection(Collection(biz)).FindOne(ctx, bson.D{{Key: "_id", Value: DocID(tenant, key)}}).Decode(&rec)
	if errors.Is(err, mongo.ErrNoDocuments) {
		if !crawl.IsDefaultTenant(tenant) {
			return crawl.Item{}, fmt.Errorf("%w: %s has no record %q of tenant %s", ErrNoRecord, biz, key, tenant)
		}
		return crawl.Item{}, fmt.Errorf("%w: %s has no record %q", ErrNoRecord, biz, key)
	}
	if err != nil {
		return crawl.Item{}, fmt.Errorf("mongo: read %s: %w", biz, err)
	}
	return rec.item(), nil
}

// Filter selects records of a biz for Each and CountMatching: of one run (RunID, when
// set) and fetched at or after Since (when set).
type Filter struct {
	RunID string
	Chain string // the chain that stored them, when set
	Since time.Time
}

func (f Filter) bson() bson.D {
	q := bson.D{}
	if f.RunID != "" {
		q = append(q, bson.E{Key: "run_id", Value: f.RunID})
	}
	if f.Chain != "" {
		q = append(q, bson.E{Key: "chain", Value: f.Chain})
	}
	if !f.Since.IsZero() {
		q = append(q, bson.E{Key: "ts", Value: bson.D{{Key: "$gte", Value: f.Since}}})
	}
	return q
}

// CountMatching is how many records of a biz the filter selects.
func (r *Reader) CountMatching(ctx context.Context, biz string, f Filter) (int64, error) {
	coll := r.db.Collection(Collection(biz))
	n, err := coll.CountDocuments(ctx, f.bson())
	if err != nil {
		return 0, fmt.Errorf("mongo: count %s.%s: %w", r.db.Name(), coll.Name(), err)
	}
	return n, nil
}

// Each streams the records of a biz the filter selects to fn, in key order, through a
// cursor (batches of 500), so memory stays bounded however many there are.
func (r *Reader) Each(ctx context.Context, biz string, f Filter, fn func(crawl.Item) error) error {
	coll := r.db.Collection(Collection(biz))
	cur, err := coll.Find(ctx, f.bson(), options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetBatchSize(500))
	if err != nil {
		return fmt.Errorf("mongo: read %s.%s: %w", r.db.Name(), coll.Name(), err)
	}
	defer cur.Close(context.Background())
	for cur.Next(ctx) {
		var rec record
		if err := cur.Decode(&rec); err != nil {
			return fmt.Errorf("mongo: decode a record of %s.%s: %w", r.db.Name(), coll.Name(), err)
		}
		if err := fn(rec.item()); err != nil {
			return err
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("mongo: read %s.%s: %w", r.db.Name(), coll.Name(), err)
	}
	return nil
}
