// Bundled in place of whatwg-url (scripts/bundle.ts). node-fetch 2, which
// @kubernetes/client-node uses, imports whatwg-url only for `URL` when
// Node's `url` module has none (`Url.URL || whatwgUrl.URL`); every Node the
// injector supports has it. The real package loads tr46's Unicode mapping
// table (and the deprecated `punycode`) into every process at start.
'use strict';
module.exports = { URL };
