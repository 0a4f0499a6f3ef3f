// Package external holds the resources a task declares in crawl.TaskSpec.Needs —
// proxies, user agents, cookies, device ids and request signatures — and the captcha
// solvers that farming chains use to obtain them.
//
// Proxies, user agents, cookies and device ids live in Redis pools, one per tenant, site
// and kind (Pools). The fetcher checks the items a request needs out of their pools
// (Pools.Lend), injects them, and returns them with the request's outcome: success,
// ban (the site refused the item), throttle (the item was used too often) or failure.
// A pool keeps a health score and failure counts per item, cools banned and throttled
// items down, drops items banned too often, and limits how many requests use one item at
// once and how often. Scheduled farming chains keep the pools full: a chain step that
// stores into `pool:cookie` (or `pool:device_id`, `pool:proxy`, `pool:user_agent`) adds
// its items to the pool of its tenant and site.
//
// Signers (RegisterSigner, HTTPSigner) sign a request just before it is sent; solvers
// (RegisterSolver, HTTPSolver) answer captchas for the bundled external.captcha_solve
// task. Sites register their own signers and ban rules (RegisterBanRule) from init.
package external
