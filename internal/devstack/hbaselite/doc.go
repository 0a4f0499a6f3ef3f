// Package hbaselite is a single-node HBase for the dev stack and for tests: a
// ZooKeeper endpoint and an HBase RPC endpoint (master and region server in one) that
// speak the parts of both protocols github.com/tsuna/gohbase uses, with cells in a
// local pebble store under <dataDir>/hbaselite, so data survives a restart. It is a
// test and development server, not a product: one process, one region per table, no
// replication, no security. Production runs real HBase; the same gohbase code talks to
// both.
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
// ClientService:
//
//   - Get: column families and qualifiers, time range, max versions, store
//     limit/offset, existence only, filters (below); also on hbase:meta.
//   - Mutate: PUT and DELETE with cells inline or in the cell block. Deletes: a whole
//     row, a family (all versions up to a timestamp, or one version), a column (all
//     versions up to a timestamp, or one version: the given or the newest).
//   - Multi: gets and mutations grouped by region, a result or exception per action.
//   - Scan: open (start/stop row, reversed, columns, time range, versions, filters,
//     number of rows, max result size), next, renew, close; scanners unused for 60s
//     expire. Also on hbase:meta, ordered as HBase's meta comparator orders it, which is
//     how gohbase locates regions.
//
// Filters: PrefixFilter, ColumnPrefixFilter, KeyOnlyFilter, FirstKeyOnlyFilter (these
// two at the top level or in a MUST_PASS_ALL list), ValueFilter, QualifierFilter and
// RowFilter with BinaryComparator or BinaryPrefixComparator, and FilterList
// (MUST_PASS_ALL, MUST_PASS_ONE).
//
// MasterService: CreateNamespace, DeleteNamespace, ListNamespaceDescriptors,
// CreateTable (column families with VERSIONS; other attributes are accepted and
// ignored), EnableTable, DisableTable, DeleteTable, GetTableNames (regex, namespace,
// system tables) and getProcedureResult. Admin calls finish before they answer, so
// their procedures are always FINISHED. gohbase's admin calls put every table in the
// "default" namespace; a qualifier "ns:table" there is read as table "table" of
// namespace "ns".
//
// Storage: every cell is a pebble key table/row/family/qualifier/timestamp (newest
// first, order-preserving escapes), so reads are range scans. A put replaces the cell
// at the same row, column and timestamp (a retried write is idempotent), then the
// column is trimmed to its family's VERSIONS. Deletes remove cells at once; there are
// no delete markers, so unlike HBase a later put with an older timestamp is visible.
//
// Limits: rows up to 32767 bytes, cells (row + qualifier + value) up to
// Options.MaxCellSize (10 MiB), requests up to Options.MaxRequestSize (256 MiB).
//
// # Errors
//
// Everything else gets an exception with a class name gohbase understands and a message
// saying what is unsupported or wrong:
//
//	org.apache.hadoop.hbase.DoNotRetryIOException          unsupported method, mutation type
//	                                                        (APPEND, INCREMENT), CheckAndPut,
//	                                                        filter or comparator; oversized row
//	                                                        or cell; malformed cell block
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
//	java.lang.IllegalArgumentException                      illegal table, family or namespace name
//
// A malformed preamble or connection header closes the connection; a panic serving a
// call becomes a DoNotRetryIOException for that call, not a crash.
package hbaselite
