// Package hbaselite is a single-node HBase for the dev stack and for tests: a
// ZooKeeper endpoint and an HBase RPC endpoint (master and region server in one) that
// speak the parts of both protocols github.com/tsuna/gohbase uses, with cells in a
// local bbolt file under <dataDir>/hbaselite, so data survives a restart. It is a
// test and development server, not a product: one process serving every region, no
// replication, no security. Production runs real HBase; the same gohbase code talks to
// both. It is trusted as far as gohbase's own integration suite passes against it (see
// the last section).
//
// # ZooKeeper endpoint
//
// The address clients take as their quorum (Server.ZK). It serves a read-only tree:
// /hbase/master and /hbase/meta-region-server, each holding the RPC endpoint's
// ServerName the way HBase writes it (0xFF, an id, "PBUF", the protobuf). Supported:
// sessions (connect, reconnect to a live session with its password, expiry after the
// negotiated timeout of 4–40s, close), ping, getData, exists, getChildren,
// getChildren2, sync, setWatches, and one-shot data, exists and child watches, fired
// when the server publishes its znodes. Writes (create, setData, delete, multi, ACLs,
// auth) answer ZUNIMPLEMENTED.
//
// # HBase RPC endpoint
//
// Connection preamble "HBas", version 0, SIMPLE authentication; a ConnectionHeader
// naming ClientService or MasterService; then framed calls: a varint-delimited
// RequestHeader and request, with a KeyValueCodec cell block when the header announces
// one. Answers carry a ResponseHeader and the response, with results in a
// KeyValueCodec cell block when the connection header asked for that codec without a
// compressor (else as protobuf cells). Up to 16 calls of a connection run at once.
//
// # Regions
//
// A table is cut into regions at the split keys it was created with (none: one
// region), [start, end) each, named "table,<start key>,<region id>.<md5>." as HBase
// names them; every region is served here. hbase:meta has one row per region
// (info:regioninfo, info:server, info:serverstartcode), built from the table
// descriptors and ordered by HBase's meta comparator, so gohbase's reversed meta scan
// finds the region of any row. hbase:namespace is served read-only from the namespaces
// (row = namespace, info:d = its NamespaceDescriptor). A get or mutation of a row
// outside the region it names gets WrongRegionException; a scan stops at its region's
// end with more_results_in_region=false, and gohbase goes on in the next region
// (forward, or reversed to the previous one); more_results=false only when the scan's
// stop row was reached. A deleted, recreated or restored table gets a new region id,
// so clients holding old region names get NotServingRegionException and look again.
//
// ClientService:
//
//   - Get: column families and qualifiers, time range, max versions, store
//     limit/offset, existence only, filters (below); also on hbase:meta and
//     hbase:namespace.
//   - Mutate: PUT, DELETE, INCREMENT (8-byte big-endian longs) and APPEND with cells
//     inline or in the cell block; increments and appends answer with the new cells.
//     Deletes: a whole row, a family (all versions up to a timestamp, or one version), a
//     column (all versions up to a timestamp, or one version: the given or the newest).
//     A condition (CheckAndPut, CheckAndDelete) on one column with BinaryComparator or
//     BinaryPrefixComparator, HBase's semantics: an empty expected value matches a
//     missing or empty cell. The "_ttl" attribute gives the put cells a time to live
//     (ms after their timestamp). Conditions, increments and appends are atomic: the
//     region server applies one mutation at a time.
//   - Multi: gets and mutations grouped by region, a result or exception per action,
//     one WAL sync per request.
//   - Scan: open (start/stop row, reversed, columns, time range, versions, filters,
//     number of rows, max result size, scan metrics ROWS_SCANNED and ROWS_FILTERED),
//     next, renew, close; scanners unused for Options.ScannerLease (default 60s)
//     expire. Also on hbase:meta and hbase:namespace.
//
// Filters: PrefixFilter, ColumnPrefixFilter, KeyOnlyFilter, FirstKeyOnlyFilter (these
// two at the top level or in a MUST_PASS_ALL list), ValueFilter, QualifierFilter and
// RowFilter with BinaryComparator or BinaryPrefixComparator, and FilterList
// (MUST_PASS_ALL, MUST_PASS_ONE).
//
// MasterService: CreateNamespace, DeleteNamespace, ListNamespaceDescriptors,
// CreateTable (split keys; column families with VERSIONS and TTL in seconds; other
// attributes are accepted and ignored), EnableTable, DisableTable, DeleteTable,
// GetTableNames (regex, namespace, system tables), getProcedureResult,
// GetClusterStatus (this server as master and only live server), SetBalancerRunning
// (recorded; nothing to balance), MoveRegion (accepted for a served region; there is
// no other server), Snapshot, IsSnapshotDone, DeleteSnapshot, GetCompletedSnapshots,
// RestoreSnapshot (over a disabled table, or into a new table: HBase's clone) and
// IsRestoreSnapshotDone. Admin calls finish before they answer, so their procedures
// are always FINISHED. gohbase's admin calls put every table in the
// "default" namespace; a qualifier "ns:table" there is read as table "table" of
// namespace "ns".
//
// Storage: every cell is a key table/row/family/qualifier/timestamp (newest first,
// order-preserving escapes) in the one bucket of a bbolt file, so reads are range
// scans; regions are row ranges of that one key space, so splits cost nothing. A put
// replaces the cell at the same row, column and timestamp (a retried write is
// idempotent), then the column is trimmed to its family's VERSIONS. Deletes remove
// cells at once; there are no delete markers, so unlike HBase a later put with an
// older timestamp is visible. Cell TTLs are kept beside the cells; expired cells (cell
// or family TTL) are not returned. A snapshot is a full copy of the table's cells
// taken while writes wait. Each mutation is its own transaction; a Mutate or Multi
// request is flushed to disk (fdatasync) once, before it is answered, and admin
// changes before theirs. A directory holding the pebble store of an earlier hbaselite
// is refused with an error rather than read as empty.
//
// Limits: rows up to 32767 bytes, cells (row + qualifier + value) up to
// Options.MaxCellSize (10 MiB), requests up to Options.MaxRequestSize (256 MiB). A
// cell's key (table, row, family and qualifier, plus a byte per zero byte and a few
// for framing) is limited to 31744 bytes, bbolt's key limit less room for snapshot
// names: a put past it gets a DoNotRetryIOException, so a row near 32767 bytes can
// only be written with short columns.
//
// # Errors
//
// Everything else gets an exception with a class name gohbase understands and a message
// saying what is unsupported or wrong:
//
//	org.apache.hadoop.hbase.DoNotRetryIOException          unsupported method, filter or
//	                                                        comparator; oversized row or cell;
//	                                                        malformed cell block; increment of
//	                                                        a value that is not 8 bytes
//	org.apache.hadoop.hbase.exceptions.RequestTooBigException  a request over the limit (the
//	                                                        connection stays usable)
//	org.apache.hadoop.hbase.TableNotFoundException          admin call on a missing table
//	                                                        (data calls on one: gohbase's
//	                                                        "table not found" from the meta lookup)
//	org.apache.hadoop.hbase.TableExistsException            create of an existing table
//	org.apache.hadoop.hbase.TableNotEnabledException        reads and writes on a disabled table,
//	                                                        disable of a disabled one
//	org.apache.hadoop.hbase.TableNotDisabledException       delete or enable of an enabled table
//	org.apache.hadoop.hbase.NamespaceNotFoundException      table in a missing namespace
//	org.apache.hadoop.hbase.NamespaceExistException         create of an existing namespace
//	org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException  unknown family
//	org.apache.hadoop.hbase.NotServingRegionException       a region of a deleted or recreated
//	                                                        table (gohbase looks it up again)
//	org.apache.hadoop.hbase.UnknownScannerException         next on a closed or expired scanner
//	org.apache.hadoop.hbase.regionserver.WrongRegionException  a row outside the region named
//	org.apache.hadoop.hbase.UnknownRegionException          MoveRegion of a region not served
//	org.apache.hadoop.hbase.snapshot.SnapshotExistsException       snapshot of a taken name
//	org.apache.hadoop.hbase.snapshot.SnapshotDoesNotExistException  unknown snapshot
//	java.lang.IllegalArgumentException                      illegal table, family or namespace name
//
// A malformed preamble or connection header closes the connection; a panic serving a
// call becomes a DoNotRetryIOException for that call, not a crash.
//
// # gohbase's integration suite
//
// TestGohbaseSuite starts hbaselite on loopback (scanner lease 5s, as the suite
// expects) and runs the tests of the pinned gohbase's files with the integration build
// tag (integration_test.go, table_test.go), from the module cache:
//
//	go test -tags integration -count=1 -run '^(<the suite's tests>)$' \
//	    -skip '^(TestChangingRegionServers)$' github.com/tsuna/gohbase -args -host=<ZooKeeper address>
//
// Measured (gohbase v0.0.0-20250311120459-be525bde7d77): 49 of the suite's 50 tests
// pass, about a minute, most of it the suite's own waits (scanner leases, TTLs, the
// client's 20ms batching of 500 sequential puts). Skipped by name, and why:
//
//   - TestChangingRegionServers: starts and stops region servers with
//     $HBASE_HOME/bin/local-regionservers.sh of an HBase installation; hbaselite is one
//     process with no such script.
//
// Known differences the suite does not reach: no delete markers (above); a reversed
// scan with an empty start row starts in the table's first region, as gohbase looks up
// the region of the start row (real HBase does the same with gohbase).
package hbaselite
