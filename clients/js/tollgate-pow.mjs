// Tollgate proof of work, for browsers and Node (>= 18). No dependencies, no build step.
//
//   import { fetchWithPow, solutionFor, solveChallenge } from "./tollgate-pow.mjs";
//   const response = await fetchWithPow("/api/thing");        // one retry after a 428
//
// The protocol (README.md, "Proof of work"): a 428 carries X-PoW-Challenge and X-PoW-Difficulty
// (and the same in its problem+json body); find a nonce of 1-64 characters of [A-Za-z0-9_-]
// such that SHA-256(challenge ":" nonce) starts with at least `difficulty` zero bits (most
// significant bit of the first byte first), and send the request again with
// `X-PoW-Solution: <challenge>:<nonce>` before the challenge expires.
//
// Hashing: node:crypto in Node (loaded with a dynamic import, so this module also loads in a
// browser), WebCrypto's crypto.subtle.digest in a browser, several digests per await.

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

async function solveWithNode(challenge, bits, { onProgress, signal } = {}, useCreateHash = false) {
  const crypto = await import("node:crypto");
  const expected = 2 ** bits;
  if (bits === 0) return "0";
  // A hex digest below this string (compared as strings: same-length lowercase hex orders as
  // the number) has enough zero bits: no Buffer per hash. crypto.hash (Node >= 20.12, 21.7) is
  // the fastest; older Nodes copy a hash of the prefix per nonce.
  const limit = hexLimit(bits);
  const input = challenge + ":";
  const oneShot = useCreateHash ? undefined : crypto.hash;
  const prefix = oneShot ? null : crypto.createHash("sha256").update(input, "latin1");
  const hex = oneShot
    ? (nonce) => oneShot("sha256", input + nonce, "hex")
    : (nonce) => prefix.copy().update(nonce, "latin1").digest("hex");
  let n = 0;
  for (;;) {
    const until = Date.now() + SLICE_MS;
    do {
      // 1024 nonces between two looks at the clock.
      for (const end = n + 1024; n < end; ++n) {
        if (hex(n.toString(RADIX)) < limit) {
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

async function solveWithWebCrypto(challenge, bits, { onProgress, signal } = {}) {
  // Node 18 has WebCrypto only in node:crypto (19 and later have the global too).
  const subtle = globalThis.crypto?.subtle ?? (isNode() ? (await import("node:crypto")).webcrypto.subtle : undefined);
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
 * options.engine: "node" (node:crypto: crypto.hash where there is one, else createHash),
 *   "node-createhash" (createHash even where crypto.hash exists, as in Node 18), or "webcrypto"
 *   (crypto.subtle.digest); the default is "node" in Node, "webcrypto" elsewhere.
 */
export async function solveChallenge(challenge, bits, options = {}) {
  check(challenge, bits);
  if (options.signal?.aborted) throw aborted(options.signal);
  const engine = options.engine ?? (isNode() ? "node" : "webcrypto");
  if (engine === "node") return solveWithNode(challenge, bits, options);
  if (engine === "node-createhash") return solveWithNode(challenge, bits, options, true);
  if (engine === "webcrypto") return solveWithWebCrypto(challenge, bits, options);
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

/**
 * fetch(input, init); when the answer is a 428 with a challenge, solves it and sends the same
 * request once more with X-PoW-Solution. Resolves to the last response. A body that can only be
 * read once (a stream) cannot be sent twice: pass a string, bytes, a Blob or FormData.
 * `options` as for solveChallenge; the signal defaults to init.signal.
 */
export async function fetchWithPow(input, init = {}, options = {}) {
  const request = new Request(input, init);
  const first = await fetch(request.clone());
  if (first.status !== 428) return first;
  const solution = await solutionFor(first, { signal: init.signal ?? request.signal, ...options });
  if (solution === null) return first;
  await first.body?.cancel().catch(() => {});
  const headers = new Headers(request.headers);
  headers.set("X-PoW-Solution", solution);
  return fetch(new Request(request, { headers }));
}

export { NONCE as NONCE_PATTERN, CHALLENGE as CHALLENGE_PATTERN };
