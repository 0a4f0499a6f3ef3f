package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawlerhq/trawler/crawl"
)

// Role is what a principal may do.
type Role string

const (
	// RoleAdmin does everything, on every tenant, and reads the audit trail.
	RoleAdmin Role = "admin"
	// RoleOperator starts and cancels runs, runs schedules and manages pools of its
	// tenants, and reads what an analyst reads; it sees pool values only when its token
	// was created with the reveal flag and the request asks (reveal=1).
	RoleOperator Role = "operator"
	// RoleAnalyst reads the runs, records, search, history and (masked) pools of its
	// tenants; it never sees pool values and changes nothing.
	RoleAnalyst Role = "analyst"
	// RoleViewer reads everything of every tenant, values of pools masked, and changes
	// nothing: the --read-token of the console.
	RoleViewer Role = "viewer"
)

// Roles lists the roles a token can have.
var Roles = []Role{RoleAdmin, RoleOperator, RoleAnalyst, RoleViewer}

// Principal is who a token speaks for.
type Principal struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Role    Role     `json:"role"`
	Tenants []string `json:"tenants,omitempty"` // of an operator or analyst
	// Reveal lets an operator see pool values when a request asks for them (reveal=1).
	Reveal    bool      `json:"reveal,omitempty"`
	Created   time.Time `json:"created"`
	CreatedBy string    `json:"created_by,omitempty"`
	Rotated   time.Time `json:"rotated,omitzero"`
}

// Scoped reports whether the principal is limited to its tenants.
func (p *Principal) Scoped() bool { return p.Role == RoleOperator || p.Role == RoleAnalyst }

// Owns reports whether the principal may see tenant's data ("" is the default tenant).
func (p *Principal) Owns(tenant string) bool {
	return !p.Scoped() || slices.Contains(p.Tenants, tenantName(tenant))
}

// tenantName is the name of tenant, the default one for "".
func tenantName(tenant string) string {
	if crawl.IsDefaultTenant(tenant) {
		return crawl.DefaultTenant
	}
	return tenant
}

// The control store's keys: each token's principal under the SHA-256 of the token (the
// token itself is never stored), and the index of principal id → that digest, which
// listing, revoking and rotating read.
const (
	tokenKeyPrefix = "trawler:tokens:"
	principalIndex = "trawler:principals"
	// TokenPrefix starts every token Trawler makes, so a leaked one is recognisable
	// (secret scanners) and a --token typo is told apart from a principal's token.
	TokenPrefix = "trw_"
)

// Principals keeps the console's principals in Redis. Every lookup reads Redis, so a
// revoked or rotated token is refused at once by every console of the fleet.
type Principals struct{ rdb redis.UniversalClient }

// NewPrincipals returns the principals kept in rdb.
func NewPrincipals(rdb redis.UniversalClient) *Principals { return &Principals{rdb: rdb} }

// ErrNoPrincipal is returned for an id no principal has.
var ErrNoPrincipal = errors.New("no principal")

func tokenKey(token string) string {
	sum := sha256.Sum256([]byte(token))
	return tokenKeyPrefix + hex.EncodeToString(sum[:])
}

func newSecret() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return TokenPrefix + hex.EncodeToString(b), nil
}

// CheckPrincipal checks a principal's role and tenants as create takes them, with the
// flag names a person gives them.
func CheckPrincipal(p *Principal) error {
	if !slices.Contains(Roles, p.Role) {
		return fmt.Errorf("--role %q: want one of admin, operator, analyst, viewer", p.Role)
	}
	if strings.TrimSpace(p.Name) == "" {
		return errors.New("--name is required: say whose token it is, e.g. --name alice")
	}
	if !p.Scoped() {
		if len(p.Tenants) > 0 {
			return fmt.Errorf("--tenant: a%s %s reads every tenant; leave --tenant out, or create an operator or analyst", map[bool]string{true: "n", false: ""}[p.Role == RoleAdmin], p.Role)
		}
	} else if len(p.Tenants) == 0 {
		return fmt.Errorf("--role %s needs --tenant T[,T…]: the tenants it works on", p.Role)
	}
	for i, t := range p.Tenants {
		if !crawl.IsTenantName(t) {
			return fmt.Errorf("--tenant %q: a tenant name is lowercase letters, digits, - and _, as a chain's tenant: line takes it", t)
		}
		p.Tenants[i] = tenantName(t)
	}
	sort.Strings(p.Tenants)
	p.Tenants = slices.Compact(p.Tenants)
	if p.Reveal && p.Role != RoleOperator {
		return fmt.Errorf("--reveal is for operators: an %s never sees pool values (admins reveal with reveal=1 already)", p.Role)
	}
	return nil
}

// Create stores a new principal and returns it with its token: the only time the token
// is shown.
func (ps *Principals) Create(ctx context.Context, p Principal) (Principal, string, error) {
	if err := CheckPrincipal(&p); err != nil {
		return Principal{}, "", err
	}
	id := make([]byte, 6)
	if _, err := rand.Read(id); err != nil {
		return Principal{}, "", err
	}
	p.ID = "p-" + hex.EncodeToString(id)
	p.Created = time.Now().UTC().Truncate(time.Second)
	tok, err := ps.store(ctx, p)
	return p, tok, err
}

// store writes p under a new token and points the index at it.
func (ps *Principals) store(ctx context.Context, p Principal) (string, error) {
	tok, err := newSecret()
	if err != nil {
		return "", err
	}
	raw, _ := json.Marshal(p)
	key := tokenKey(tok)
	if err := ps.rdb.Set(ctx, key, raw, 0).Err(); err != nil {
		return "", fmt.Errorf("store the token in Redis: %w", err)
	}
	if err := ps.rdb.HSet(ctx, principalIndex, p.ID, strings.TrimPrefix(key, tokenKeyPrefix)).Err(); err != nil {
		return "", fmt.Errorf("index the token in Redis: %w", err)
	}
	return tok, nil
}

// Lookup returns the principal of a token, nil when no principal has it.
func (ps *Principals) Lookup(ctx context.Context, token string) (*Principal, error) {
	raw, err := ps.rdb.Get(ctx, tokenKey(token)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	p := &Principal{}
	if err := json.Unmarshal(raw, p); err != nil {
		return nil, fmt.Errorf("principal record %s… is not JSON: %w", tokenKey(token)[:len(tokenKeyPrefix)+8], err)
	}
	return p, nil
}

// List returns every principal, by name then id.
func (ps *Principals) List(ctx context.Context) ([]Principal, error) {
	idx, err := ps.rdb.HGetAll(ctx, principalIndex).Result()
	if err != nil {
		return nil, err
	}
	out := []Principal{}
	for _, digest := range idx {
		raw, err := ps.rdb.Get(ctx, tokenKeyPrefix+digest).Bytes()
		if errors.Is(err, redis.Nil) {
			continue // revoked between the two reads
		}
		if err != nil {
			return nil, err
		}
		var p Principal
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// get returns the principal of id and the digest of its token.
func (ps *Principals) get(ctx context.Context, id string) (Principal, string, error) {
	digest, err := ps.rdb.HGet(ctx, principalIndex, id).Result()
	if errors.Is(err, redis.Nil) {
		return Principal{}, "", fmt.Errorf("%w %q: `trawler token list` shows the ids", ErrNoPrincipal, id)
	}
	if err != nil {
		return Principal{}, "", err
	}
	raw, err := ps.rdb.Get(ctx, tokenKeyPrefix+digest).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return Principal{}, "", err
	}
	var p Principal
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &p); err != nil {
			return Principal{}, "", err
		}
	}
	p.ID = id
	return p, digest, nil
}

// Revoke deletes a principal's token: every console refuses it from the next request.
func (ps *Principals) Revoke(ctx context.Context, id string) (Principal, error) {
	p, digest, err := ps.get(ctx, id)
	if err != nil {
		return Principal{}, err
	}
	// The token first: once it is gone, no console accepts it.
	if err := ps.rdb.Del(ctx, tokenKeyPrefix+digest).Err(); err != nil {
		return Principal{}, err
	}
	return p, ps.rdb.HDel(ctx, principalIndex, id).Err()
}

// Rotate gives a principal a new token and refuses the old one from the next request.
func (ps *Principals) Rotate(ctx context.Context, id string) (Principal, string, error) {
	p, old, err := ps.get(ctx, id)
	if err != nil {
		return Principal{}, "", err
	}
	p.Rotated = time.Now().UTC().Truncate(time.Second)
	tok, err := ps.store(ctx, p)
	if err != nil {
		return Principal{}, "", err
	}
	return p, tok, ps.rdb.Del(ctx, tokenKeyPrefix+old).Err()
}
