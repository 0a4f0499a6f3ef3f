package devstack

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// Lookups by _id on the embedded server use an index, and the data survives a restart
// on the same port and directory.
func TestMongoIndexesIDAndRestarts(t *testing.T) {
	dir := t.TempDir()
	uri, stop, err := StartMongo(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := mongo.Connect(ctx, options.Client().ApplyURI(uri))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(ctx)
	coll := c.Database("trawler").Collection("demo_story")
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "ferretdb", "trawler.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var table string
	if err := db.QueryRow(`SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'demo_story_%'`).Scan(&table); err != nil {
		t.Fatal(err)
	}
	var plan string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var id, parent, notused, rows int
		// A real statement first: EXPLAIN alone does not notice a schema change.
		if err := db.QueryRow(fmt.Sprintf(`SELECT count(*) FROM %q`, table)).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(fmt.Sprintf(`EXPLAIN QUERY PLAN SELECT _ferretdb_sjson FROM %q WHERE _ferretdb_sjson->'$._id' = ?`, table), `"a"`).Scan(&id, &parent, &notused, &plan); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(plan, "USING INDEX") {
			break
		}
	}
	if !strings.Contains(plan, "USING INDEX") {
		t.Fatalf("lookup by _id: %s, want an index search", plan)
	}

	_ = stop()
	addr := strings.TrimSuffix(strings.TrimPrefix(uri, "mongodb://"), "/")
	if _, stop, err = StartMongoOn(dir, addr); err != nil {
		t.Fatal(err)
	}
	var doc bson.M
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Decode(&doc); err != nil || fmt.Sprint(doc["n"]) != "1" {
		t.Fatalf("after a restart: %v %v", doc, err)
	}
}

func TestKafkaStartsAndRestartsOnItsPort(t *testing.T) {
	dir := t.TempDir()
	addrs, stop, err := StartKafka(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != KafkaBrokers || !strings.HasPrefix(addrs[0], "127.0.0.1:") {
		t.Fatalf("addrs %v", addrs)
	}
	_ = stop()
	var port int
	fmt.Sscanf(addrs[0][strings.LastIndex(addrs[0], ":")+1:], "%d", &port)
	again, stop, err := StartKafkaOn(dir, []int{port})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if again[0] != addrs[0] {
		t.Errorf("restarted on %v, want %v", again, addrs)
	}
	if _, _, err := StartKafka(""); err == nil {
		t.Error("StartKafka without a directory succeeded")
	}
}
