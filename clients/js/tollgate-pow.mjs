// Tollgate proof of work, for browsers and Node (>= 18). No dependencies, no build step.
//
//   import { fetchWithPow, solutionFor, solveChallenge } from "./tollgate-pow.mjs";
//   const response = await fetchWithPow("/api/thing");        // one retry after a 428
//
// The protocol (docs/pow.md, "The protocol"): a 428 carries X-PoW-Challenge and X-PoW-Difficulty
// (and the same in its problem+json body); find a nonce of 1-64 characters of [A-Za-z0-9_-]
// such that SHA-256(challenge ":" nonce) starts with at least `difficulty` zero bits (most
// significant bit of the first byte first), and send the request again with
// `X-PoW-Solution: <challenge>:<nonce>` before the challenge expires.
//
// Hashing: node:crypto in Node (loaded with a dynamic import, so this module also loads in a
// browser); in a browser SHA-256 written in JavaScript from the state after the challenge's
// full 64-byte blocks (20 times as fast as WebCrypto's digest(), a promise per hash), its answer
// checked with WebCrypto. The search gives the event loop a turn every 50 ms.

const CHALLENGE = /^[A-Za-z0-9_-]{1,512}$/;
const NONCE = /^[A-Za-z0-9_-]{1,64}$/;

// Nonces are a counter written in base 36 ([0-9a-z]): n tried nonces are "0" ... (n-1) in base
// 36, so `parseInt(nonce, 36) + 1` is the number of hashes a solve took.
const RADIX = 36;

// How long the Node solver computes between two turns of the event loop (for `signal`,
// `onProgress` and the rest of the program), and how many WebCrypto digests go in one await.
const SLICE_MS = 50;
const WEBCRYPTO_BATCH = 64;

/** Throws a TypeError unless `challenge` and `bits` are something a gateway can have issued. */
function check(challenge, bits) {
  if (typeof challenge !== "string" || !CHALLENGE.test(challenge)) {
    throw new TypeError("tollgate-pow: a challenge is 1-512 characters of [A-Za-z0-9_-]");
  }
  if (!Number.isInteger(bits) || bits < 0 || bits > 64) {
    throw new RangeError("tollgate-pow: bits must be an integer from 0 to 64");
  }
}

/** True when `digest` (bytes) starts with at least `bits` zero bits. */
export function hasLeadingZeroBits(digest, bits) {
  let i = 0;
  for (; bits >= 8; bits -= 8, ++i) {
    if (digest[i] !== 0) return false;
  }
  return bits === 0 || digest[i] >> (8 - bits) === 0;
}

function isNode() {
  return typeof process !== "undefined" && process.versions != null && process.versions.node != null;
}

function aborted(signal) {
  return signal?.reason ?? new DOMException("the proof of work was aborted", "AbortError");
}

// A turn of the event loop: setImmediate where there is one (Node), else a timer.
const yieldToLoop = () =>
  new Promise((resolve) => (typeof setImmediate === "function" ? setImmediate(resolve) : setTimeout(resolve, 0)));

/** The digest's first 16 hex digits below which it has at least `bits` (1-64) zero bits. */
function hexLimit(bits) {
  return (1n << BigInt(64 - bits)).toString(16).padStart(16, "0");
}

async function solveWithNode(challenge, bits, options) {
  const crypto = await import("node:crypto");
  // crypto.hash (Node >= 20.12, 21.7) beats this module's own SHA-256; older Nodes' createHash
  // (an object per hash) does not.
  const oneShot = crypto.hash;
  if (typeof oneShot !== "function") return solveWithJs(challenge, bits, options);
  const { onProgress, signal } = options;
  const expected = 2 ** bits;
  if (bits === 0) return "0";
  // A hex digest below this string (compared as strings: same-length lowercase hex orders as
  // the number) has enough zero bits: no Buffer per hash.
  const limit = hexLimit(bits);
  const input = challenge + ":";
  let n = 0;
  for (;;) {
    const until = Date.now() + SLICE_MS;
    do {
      // 1024 nonces between two looks at the clock.
      for (const end = n + 1024; n < end; ++n) {
        if (oneShot("sha256", input + n.toString(RADIX), "hex") < limit) {
          onProgress?.({ tried: n + 1, expected });
          return n.toString(RADIX);
        }
      }
    } while (Date.now() < until);
    onProgress?.({ tried: n, expected });
    await yieldToLoop();
    if (signal?.aborted) throw aborted(signal);
  }
}

// --- SHA-256 in plain JavaScript ---------------------------------------------------------------
// WebCrypto's digest() costs a promise per hash (tens of thousands a second in a browser); this
// hashes the challenge's full 64-byte blocks once and then only the last block or two per nonce.

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const H0 = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

/** Compresses the 64 bytes of `bytes` at `at` into `state` (8 words), with `w` (64 words) as scratch. */
function compress(state, bytes, at, w) {
  for (let i = 0; i < 16; ++i, at += 4) {
    w[i] = (bytes[at] << 24) | (bytes[at + 1] << 16) | (bytes[at + 2] << 8) | bytes[at + 3];
  }
  for (let i = 16; i < 64; ++i) {
    const x = w[i - 15];
    const y = w[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
  }
  let a = state[0], b = state[1], c = state[2], d = state[3];
  let e = state[4], f = state[5], g = state[6], h = state[7];
  for (let i = 0; i < 64; ++i) {
    const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const t1 = (h + s1 + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
    const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    h = g; g = f; f = e; e = (d + t1) | 0;
    d = c; c = b; b = a; a = (t1 + t2) | 0;
  }
  state[0] = (state[0] + a) | 0; state[1] = (state[1] + b) | 0;
  state[2] = (state[2] + c) | 0; state[3] = (state[3] + d) | 0;
  state[4] = (state[4] + e) | 0; state[5] = (state[5] + f) | 0;
  state[6] = (state[6] + g) | 0; state[7] = (state[7] + h) | 0;
}

/**
 * A function of a nonce (a string of ASCII characters) that returns the first two words of
 * SHA-256(challenge ":" nonce) in `out` (Int32Array(2)). Exported for the tests.
 */
export function prefixHasher(challenge) {
  const prefix = new TextEncoder().encode(challenge + ":");
  const full = prefix.length - (prefix.length % 64);
  const mid = Int32Array.from(H0);
  const w = new Int32Array(64);
  for (let at = 0; at < full; at += 64) compress(mid, prefix, at, w);
  const tail = prefix.length - full;
  const block = new Uint8Array(192);  // the tail, a nonce of up to 64, 0x80, the length
  block.set(prefix.subarray(full));
  const state = new Int32Array(8);
  return (nonce, out) => {
    let at = tail;
    for (let i = 0; i < nonce.length; ++i) block[at++] = nonce.charCodeAt(i);
    block[at++] = 0x80;
    const blocks = (at + 8 + 63) >>> 6;
    const end = blocks * 64;
    block.fill(0, at, end - 4);
    const bitLength = (prefix.length + nonce.length) * 8;  // below 2^32: the high word stays 0
    block[end - 4] = bitLength >>> 24;
    block[end - 3] = bitLength >>> 16;
    block[end - 2] = bitLength >>> 8;
    block[end - 1] = bitLength;
    state.set(mid);
    for (let b = 0; b < blocks; ++b) compress(state, block, b * 64, w);
    out[0] = state[0];
    out[1] = state[1];
  };
}

/** True when a digest starting with the words `w0`, `w1` has at least `bits` (0-64) zero bits. */
function wordsHaveZeroBits(w0, w1, bits) {
  if (bits <= 32) return bits === 0 || w0 >>> (32 - bits) === 0;
  return w0 === 0 && w1 >>> (64 - bits) === 0;
}

async function solveWithJs(challenge, bits, { onProgress, signal } = {}) {
  const expected = 2 ** bits;
  if (bits === 0) return "0";
  const hash = prefixHasher(challenge);
  const out = new Int32Array(2);
  let n = 0;
  for (;;) {
    const until = Date.now() + SLICE_MS;
    do {
      for (const end = n + 1024; n < end; ++n) {
        hash(n.toString(RADIX), out);
        if (wordsHaveZeroBits(out[0], out[1], bits)) {
          onProgress?.({ tried: n + 1, expected });
          return n.toString(RADIX);
        }
      }
    } while (Date.now() < until);
    onProgress?.({ tried: n, expected });
    await yieldToLoop();
    if (signal?.aborted) throw aborted(signal);
  }
}

/** The WebCrypto of this context: the global one, or node:crypto's in Node 18; else null. */
async function webCrypto() {
  if (globalThis.crypto?.subtle) return globalThis.crypto.subtle;
  return isNode() ? (await import("node:crypto")).webcrypto.subtle : null;
}

async function solveWithWebCrypto(challenge, bits, { onProgress, signal } = {}) {
  const subtle = await webCrypto();
  if (!subtle) throw new Error("tollgate-pow: no WebCrypto here (crypto.subtle needs a secure context: https or localhost)");
  const prefix = new TextEncoder().encode(challenge + ":");
  const expected = 2 ** bits;
  const inputs = [];
  for (let n = 0; ; ) {
    inputs.length = 0;
    for (let i = 0; i < WEBCRYPTO_BATCH; ++i, ++n) {
      const nonce = n.toString(RADIX);
      const input = new Uint8Array(prefix.length + nonce.length);
      input.set(prefix);
      for (let j = 0; j < nonce.length; ++j) input[prefix.length + j] = nonce.charCodeAt(j);
      inputs.push(subtle.digest("SHA-256", input));
    }
    const digests = await Promise.all(inputs);
    for (let i = 0; i < digests.length; ++i) {
      if (hasLeadingZeroBits(new Uint8Array(digests[i]), bits)) {
        const tried = n - digests.length + i + 1;
        onProgress?.({ tried, expected });
        return (tried - 1).toString(RADIX);
      }
    }
    if (n % (WEBCRYPTO_BATCH * 64) === 0) onProgress?.({ tried: n, expected });
    if (signal?.aborted) throw aborted(signal);
  }
}

/**
 * A nonce that solves `challenge` at `bits` (resolves to a string of [0-9a-z]).
 *
 * options.onProgress({tried, expected}): called now and then (expected = 2^bits hashes on average).
 * options.signal: an AbortSignal; the promise rejects with its reason once it is aborted.
 * options.engine: "node" (node:crypto's crypto.hash where there is one, else "js"), "js"
 *   (SHA-256 in JavaScript), "webcrypto" (crypto.subtle.digest, batched), or "browser" (the
 *   default outside Node: "js", its answer checked with WebCrypto where there is one; should
 *   they disagree, the search runs again with WebCrypto alone). The default in Node is "node".
 */
export async function solveChallenge(challenge, bits, options = {}) {
  check(challenge, bits);
  if (options.signal?.aborted) throw aborted(options.signal);
  const engine = options.engine ?? (isNode() ? "node" : "browser");
  if (engine === "node") return solveWithNode(challenge, bits, options);
  if (engine === "js") return solveWithJs(challenge, bits, options);
  if (engine === "webcrypto") return solveWithWebCrypto(challenge, bits, options);
  if (engine === "browser") {
    const nonce = await solveWithJs(challenge, bits, options);
    const subtle = await webCrypto();
    if (subtle === null) return nonce;  // http:// pages other than localhost have none
    const input = new TextEncoder().encode(`${challenge}:${nonce}`);
    if (hasLeadingZeroBits(new Uint8Array(await subtle.digest("SHA-256", input)), bits)) return nonce;
    return solveWithWebCrypto(challenge, bits, options);
  }
  throw new TypeError(`tollgate-pow: unknown engine ${engine}`);
}

/** The challenge and difficulty of a 428 (headers, else its problem+json body), or null. */
async function challengeOf(response) {
  if (response.status !== 428) return null;
  let challenge = response.headers.get("X-PoW-Challenge");
  let difficulty = response.headers.get("X-PoW-Difficulty");
  let algorithm = response.headers.get("X-PoW-Algorithm");
  if (challenge === null || difficulty === null) {
    // A cross-origin script sees only the headers the gateway exposes (CORS): the body says
    // the same. Read from a clone, so that the caller can still read the body.
    let body;
    try {
      body = await response.clone().json();
    } catch {
      return null;
    }
    if (typeof body?.challenge !== "string") return null;
    ({ challenge, difficulty, algorithm } = body);
    difficulty = String(difficulty);
  }
  if (algorithm != null && String(algorithm).toLowerCase() !== "sha256") {
    throw new Error(`tollgate-pow: unsupported algorithm ${algorithm}`);
  }
  if (!/^[0-9]{1,2}$/.test(difficulty)) throw new RangeError(`tollgate-pow: bad difficulty ${difficulty}`);
  return { challenge, bits: Number(difficulty) };
}

/**
 * The X-PoW-Solution value (`<challenge>:<nonce>`) for a 428 fetch Response, or null when the
 * response is not a 428 with a challenge. `options` as for solveChallenge.
 */
export async function solutionFor(response, options = {}) {
  const found = await challengeOf(response);
  if (found === null) return null;
  const nonce = await solveChallenge(found.challenge, found.bits, options);
  return `${found.challenge}:${nonce}`;
}

// The clearance a proof earned, per origin (docs/pow.md, "Clearance"): sent back as
// X-PoW-Clearance, it spares the next requests a solve while it lasts.
const clearances = new Map();

function originOf(request) {
  try {
    return new URL(request.url).origin;
  } catch {
    return "";
  }
}

/** `request` carrying the clearance last earned at `origin`, if there is one. */
function withClearance(request, origin) {
  const clearance = clearances.get(origin);
  if (clearance === undefined || request.headers.has("X-PoW-Clearance")) return request;
  const headers = new Headers(request.headers);
  headers.set("X-PoW-Clearance", clearance);
  return new Request(request, { headers });
}

function rememberClearance(origin, response) {
  const clearance = response.headers.get("X-PoW-Clearance");
  if (clearance) clearances.set(origin, clearance);
}

/**
 * fetch(input, init); when the answer is a 428 with a challenge, solves it and sends the same
 * request once more with X-PoW-Solution. Resolves to the last response. A body that can only be
 * read once (a stream) cannot be sent twice: pass a string, bytes, a Blob or FormData.
 * `options` as for solveChallenge; the signal defaults to init.signal. The clearance a proof
 * earns is kept per origin and sent with the next requests there (X-PoW-Clearance).
 */
export async function fetchWithPow(input, init = {}, options = {}) {
  const request = new Request(input, init);
  const origin = originOf(request);
  const first = await fetch(withClearance(request.clone(), origin));
  rememberClearance(origin, first);
  if (first.status !== 428) return first;
  const solution = await solutionFor(first, { signal: init.signal ?? request.signal, ...options });
  if (solution === null) return first;
  await first.body?.cancel().catch(() => {});
  const headers = new Headers(request.headers);
  headers.set("X-PoW-Solution", solution);
  const second = await fetch(new Request(request, { headers }));
  rememberClearance(origin, second);
  return second;
}

export { NONCE as NONCE_PATTERN, CHALLENGE as CHALLENGE_PATTERN };
