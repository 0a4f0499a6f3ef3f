// Package external will hold the resources tasks declare in TaskSpec.Needs — proxies,
// user agents, cookies, device ids, request signers and captcha solvers — as interfaces
// with Redis-backed pools per tenant and site, kept full by scheduled farming chains.
//
// Nothing is implemented here yet: a task that declares Needs today gets no resource
// injected, and the fetcher sends its own user agent directly.
package external
