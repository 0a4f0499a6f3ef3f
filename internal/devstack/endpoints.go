package devstack

import "github.com/trawlerhq/trawler/internal/endpoints"

// The endpoints file lives in its own package (internal/endpoints) so that builds
// without the embedded servers read it too; these names keep the stack's API.
const EndpointsFile = endpoints.File

// Endpoints is the content of <DataDir>/endpoints.json.
type Endpoints = endpoints.Endpoints

// EndpointsPath returns the path of the endpoints file in dataDir.
func EndpointsPath(dataDir string) string { return endpoints.Path(dataDir) }

// WriteEndpoints atomically replaces <dataDir>/endpoints.json.
func WriteEndpoints(dataDir string, e Endpoints) error { return endpoints.Write(dataDir, e) }

// ReadEndpoints reads <dataDir>/endpoints.json.
func ReadEndpoints(dataDir string) (Endpoints, error) { return endpoints.Read(dataDir) }

func removeEndpoints(dataDir string) error { return endpoints.Remove(dataDir) }
