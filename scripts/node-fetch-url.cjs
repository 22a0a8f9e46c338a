// Bundled in place of Node's `url` for node-fetch 2 alone (scripts/bundle.ts).
// node-fetch 2, which @kubernetes/client-node's watches and API calls use,
// parses every request's URL with the legacy `url.parse()` (after a WHATWG
// `new URL()` for an absolute one). Node 24 warns about that call once per
// process (DEP0169), and from the bundle it no longer comes from
// node_modules, which Node would excuse: every replica logged the warning at
// start. This `parse` gives node-fetch the same fields from the WHATWG
// parser (url.urlToHttpOptions, plus `host`); a relative URL, which
// node-fetch refuses anyway ("Only absolute URLs are supported"), keeps no
// protocol. Everything else is Node's own `url`.
'use strict';
const url = require('node:url');

function parse(input) {
  let parsed;
  try {
    parsed = new URL(input);
  } catch {
    return { protocol: null, slashes: null, auth: null, host: null, port: null, hostname: null, hash: null, search: null, query: null, pathname: input, path: input, href: input };
  }
  const options = url.urlToHttpOptions(parsed);
  return {
    protocol: options.protocol,
    slashes: true,
    auth: options.auth ?? null,
    host: parsed.host,
    port: parsed.port === '' ? null : parsed.port,
    hostname: options.hostname,
    hash: options.hash === '' ? null : options.hash,
    search: options.search === '' ? null : options.search,
    query: options.search === '' ? null : options.search.slice(1),
    pathname: options.pathname,
    path: options.path,
    href: options.href,
  };
}

module.exports = { ...url, parse };
