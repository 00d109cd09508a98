#!/usr/bin/env node
// node clients/js/solve.mjs CHALLENGE BITS: prints a nonce that solves CHALLENGE at BITS (the
// X-PoW-Solution header is then `CHALLENGE:NONCE`). Exit status 2 on bad arguments.
import { solveChallenge } from "./tollgate-pow.mjs";

const [challenge, bitsText, ...rest] = process.argv.slice(2);
if (challenge === undefined || bitsText === undefined || rest.length > 0 || !/^[0-9]{1,2}$/.test(bitsText)) {
  console.error("usage: node solve.mjs CHALLENGE BITS   (BITS: 0 to 64)");
  process.exit(2);
}
try {
  console.log(await solveChallenge(challenge, Number(bitsText)));
} catch (e) {
  console.error(`solve.mjs: ${e.message}`);
  process.exit(2);
}
