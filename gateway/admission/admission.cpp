#include "gateway/admission/admission.hpp"

#include <array>
#include <span>

#include "gateway/admission/problem.hpp"
#include "gateway/core/text.hpp"
#include "gateway/policy/browser.hpp"
#include "gateway/policy/client_address.hpp"
#include "gateway/policy/keys.hpp"

namespace tollgate::admission {

namespace {

/// The header line that clears the proof-of-work cookie, on a TLS listener or not.
std::string_view clear_pow_cookie(bool tls) noexcept {
  return tls ? "Set-Cookie: tollgate_pow=; Path=/; Max-Age=0; SameSite=Lax; Secure\r\n"
             : "Set-Cookie: tollgate_pow=; Path=/; Max-Age=0; SameSite=Lax\r\n";
}

/// The rightmost X-Forwarded-For values, the only ones the walk to the client can reach.
struct forwarded_values {
  std::array<std::string_view, 8> values;
  std::size_t n = 0;

  static void add(void* self, std::string_view v) {
    auto& f = *static_cast<forwarded_values*>(self);
    if (f.n == f.values.size()) {
      std::move(f.values.begin() + 1, f.values.end(), f.values.begin());
      --f.n;
    }
    f.values[f.n++] = v;
  }
};

/// The address a request is charged to (docs/design.md §7): the peer, or past trusted proxies
/// the hop X-Forwarded-For names.
core::address client_address_of(const setting& s, const request_view& v) {
  forwarded_values f;
  v.headers->each("X-Forwarded-For", &forwarded_values::add, &f);
  return policy::client_address(v.peer, std::span(f.values.data(), f.n), s.config.trusted_proxies);
}

/// The proofs of a request's proof-of-work cookies (docs/design.md §5 "Browsers"): of the
/// first four pairs of that name, over every Cookie field. A browser may send several (one set
/// for a parent domain by a sibling site, which the gateway's clearing cannot reach, first).
struct cookie_proofs {
  std::array<std::string_view, 4> found;
  std::size_t n = 0;

  static void add(void* self, std::string_view line) {
    auto& c = *static_cast<cookie_proofs*>(self);
    if (c.n == c.found.size() || line.find(policy::pow_cookie) == std::string_view::npos) return;
    std::string_view proof;
    while (c.n < c.found.size() && policy::next_cookie(line, policy::pow_cookie, proof)) {
      if (!proof.empty()) c.found[c.n++] = proof;
    }
  }
};

/// The proof a request's cookies carry, or "": of several, the first that checks out, else
/// the first.
std::string_view cookie_proof(const setting& s, const request_view& v, const record& r) {
  cookie_proofs c;
  v.headers->each("Cookie", &cookie_proofs::add, &c);
  if (c.n <= 1) return c.found[0];  // the usual case: one, checked by the gate alone
  const auto& pow = r.category().pow;
  for (std::size_t i = 0; i < c.n; ++i) {
    if (policy::check_proof(s.pow, c.found[i], r.who, pow, v.now / core::ns_per_s).failure ==
        pow::proof_failure::none) {
      return c.found[i];
    }
  }
  return c.found[0];
}

/// The clearance a request carries (docs/design.md §16): its X-PoW-Clearance, else the first
/// clearance cookie; "" for none.
std::string_view clearance_of(const request_view& v) {
  std::string_view c = v.headers->value(policy::clearance_field);
  if (!c.empty()) return c;
  struct first {
    std::string_view found;
    static void add(void* self, std::string_view line) {
      auto& f = *static_cast<first*>(self);
      if (!f.found.empty() || line.find(policy::clearance_cookie) == std::string_view::npos) return;
      std::string_view value;
      while (f.found.empty() && policy::next_cookie(line, policy::clearance_cookie, value))
        f.found = value;
    }
  } f;
  v.headers->each("Cookie", &first::add, &f);
  return f.found;
}

/// Sends a clearance for the proof `r` just spent (docs/design.md §16) with its answer: the
/// proof's bits over the category's base_bits set its lifetime.
void earn_clearance(const policy::pow_state& pow, const setting& s, record& r) {
  const config::pow_settings::clearance_config& c = s.config.pow.clearance;
  const policy::category_pow& cp = r.category().pow;
  const unsigned bits = r.verdict.sent.claims.bits;
  const core::nanos life =
      pow::clearance_lifetime(bits, cp.base_bits, c.base.count(), c.max.count());
  r.clearance = pow.clearances().issue(
      {r.gate.now, r.gate.now + life, static_cast<std::uint8_t>(bits), r.who.tag, cp.scope});
  r.clearance_seconds = life / core::ns_per_s;
}

/// The header-keyed limit of `c` whose header the request carries more than once, if any:
/// which value would be charged, and which would the upstream read?
const limit::limit_spec* repeated_key_header(const policy::category_limits& c,
                                             const header_source& h) {
  for (const std::uint8_t i : c.keyed) {
    const limit::limit_spec& spec = c.limits[i];
    if (spec.source == core::key_source::header && h.count(spec.key_name) > 1) return &spec;
  }
  return nullptr;
}

/// Whether `v` is a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
bool is_preflight(const request_view& v) {
  return v.method == "OPTIONS" && v.headers->count("Origin") > 0 &&
         v.headers->count("Access-Control-Request-Method") > 0;
}

/// A local answer of `status` whose body and fields are in r.reply already, the gateway's own
/// fields added; the connection stays open only if `keep_open`.
step answer_with(record& r, std::uint16_t status, bool keep_open) {
  r.reply.status = status;
  // A refusal names the client's step on the penalty ladder (docs/design.md §16).
  if (r.penalty != pow::penalty_action::none && (status == 403 || status == 429) &&
      r.reply.content_type.empty() && !r.reply.body.empty() && r.reply.body.back() == '}') {
    r.reply.body.pop_back();
    r.reply.body += ",\"step\":\"";
    r.reply.body += pow::penalty_action_name(r.penalty);
    r.reply.body += "\"}";
  }
  r.reply.keep_open = keep_open;
  append_own_fields(r, r.reply.fields);
  return step::answer;
}

/// Whether the connection may stay open after a refusal: the client asked, and no body is left
/// unread (the body of a refused request is not read).
bool may_stay(const record& r) noexcept {
  return r.keep_alive && r.body_done;
}

/// 400 for a head admission refuses before a route counts it; the connection closes.
step bad_request(record& r, std::string_view detail) {
  r.route = nullptr;  // not counted by category
  r.reply.body = problem_body(400, "Bad Request", detail);
  return answer_with(r, 400, false);
}

/// Renders the challenge of `r` as the browsers' page (docs/design.md §5 "Browsers") over the
/// problem body; the 428's X-PoW-* fields stay.
void render_page(const setting& s, record& r) {
  const policy::challenge_values& c = r.verdict.challenge;
  s.page->render(r.reply.body, c, c.expires - r.gate.now / core::ns_per_s, r.tls);
  r.reply.fields += "Content-Security-Policy: ";
  r.reply.fields += s.page->content_security_policy();
  // The same target answers JSON to an API client: caches keep the two apart, and keep
  // neither (a challenge is for one client, once).
  r.reply.fields += "\r\nCache-Control: no-store\r\nVary: Accept\r\n";
  r.reply.content_type = "text/html; charset=utf-8";
}

/// Turns the gate's verdict into the step: the outcome and the effects, and a refusal's
/// answer.
step conclude(const setting& s, record& r) {
  const policy::gate_verdict& v = r.verdict;
  r.fx.gate = v.effects;
  r.fx.outcome = v.result;
  if (v.forward()) return step::forward;
  r.inflight.release();
  r.fx.upgrade_refused = r.upgrade;
  r.reply.rate_fields = v.limits_checked;
  std::uint16_t status = 429;
  switch (v.result) {
    case core::outcome::banned:
      status = 403;
      write_banned(r.reply.body, r.reply.fields, v.retry_after);
      break;
    case core::outcome::challenged:
      status = 428;
      write_challenge(r.reply.body, r.reply.fields, v.challenge);
      if (s.page != nullptr && policy::prefers_html(r.headers->value("Accept"))) render_page(s, r);
      break;
    default:  // limited
      write_limited_body(r.reply.body, r.rate);
      break;
  }
  return answer_with(r, status, may_stay(r));
}

/// Answers a preflight of a category whose CORS the gateway owns: 200 without a body, the
/// preflight's fields for an allowed origin. Never charged nor challenged: it cannot carry a
/// proof, and charging it would halve the category's limits for scripts. The access lists
/// and bans came first.
step answer_preflight(const request_view& v, record& r) {
  r.fx.outcome = core::outcome::allowed;
  if (!r.cors_origin.empty()) {
    r.cors->append_preflight_fields(r.reply.fields,
                                    v.headers->value("Access-Control-Request-Headers"));
  }
  return answer_with(r, 200, may_stay(r));
}

/// The request's token (docs/design.md §15), or "" when it has none; `twice` when its field
/// comes more than once (which one would the upstream read?).
std::string_view token_of(const config::jwt_config& j, const header_source& h, bool& twice) {
  if (j.from.cookie) {
    // A browser may split its cookies over several Cookie fields: the token's cookie is looked
    // for in each, and is refused when named twice.
    struct cookies {
      std::string_view name, value;
      std::size_t n = 0;
      static void add(void* self, std::string_view line) {
        auto& c = *static_cast<cookies*>(self);
        std::string_view v;
        while (c.n < 2 && policy::next_cookie(line, c.name, v)) {
          if (c.n++ == 0) c.value = v;
        }
      }
    } c{j.from.name, {}};
    h.each("Cookie", &cookies::add, &c);
    twice = c.n > 1;
    return c.value;
  }
  // One pass over the fields of that name: the first value, and whether there is another.
  struct first_of {
    std::string_view value;
    std::size_t n = 0;
    static void add(void* self, std::string_view v) {
      auto& f = *static_cast<first_of*>(self);
      if (f.n++ == 0) f.value = v;
    }
  } f;
  h.each(j.from.name, &first_of::add, &f);
  twice = f.n > 1;
  if (core::iequals(j.from.name, "authorization")) return core::bearer_token(f.value);
  return core::trim(f.value);
}

/// 401 for a refused token (on_invalid: reject), with the reason; a token_invalid violation.
step unauthorized(const setting& s, record& r) {
  r.fx.outcome = core::outcome::unauthorized;
  r.fx.token_invalid = true;
  const std::string_view why = identity::failure_name(r.token);
  problem_writer(r.reply.body, 401, "Unauthorized")
      .text("detail", "the token was refused")
      .text("code", "token_invalid")
      .text("reason", why)
      .finish();
  if (!s.config.identity.jwt->from.cookie) {
    r.reply.fields += "WWW-Authenticate: Bearer error=\"invalid_token\"\r\n";
  }
  return answer_with(r, 401, may_stay(r));
}

/// A refusal with outcome `o`: `status` with a problem body of `detail` and `code`.
step refuse(record& r, core::outcome o, std::uint16_t status, std::string_view title,
            std::string_view detail, std::string_view code) {
  r.fx.outcome = o;
  problem_writer(r.reply.body, status, title).text("detail", detail).text("code", code).finish();
  return answer_with(r, status, may_stay(r));
}

/// 429 for a request over a concurrency limit (docs/design.md §15): `spec` has as many in
/// flight for its key as it allows. Nothing was charged.
step too_many_in_flight(record& r, const limit::limit_spec& spec) {
  r.fx.outcome = core::outcome::limited;
  problem_writer(r.reply.body, 429, "Too Many Requests")
      .text("detail", "too many requests in flight")
      .text("code", "too_many_in_flight")
      .text("level", spec.name)
      .number("retry_after", 1)
      .finish();
  r.reply.fields = "Retry-After: 1\r\nX-RateLimit-Reason: too_many_in_flight\r\n";
  r.reply.content_type = {};
  return answer_with(r, 429, may_stay(r));
}

/// Takes the places of r.limits' concurrency limits; the limit that is full, if any (nothing
/// held then).
const limit::limit_spec* take_places(const setting& s, record& r) {
  for (std::uint8_t i = 0; i < r.limits.inflight_count; ++i) {
    const limit::limit_group& g = r.limits.inflight[i];
    if (!r.inflight.take(*s.inflight, limit::inflight_table::key_of(g.spec->scope, g.key),
                         g.spec->concurrency)) {
      r.inflight.release();
      return g.spec;
    }
  }
  return nullptr;
}

/// Whether `method` is safe (RFC 9110 §9.2.1): what a client on the read_only step may still
/// send.
bool safe_method(std::string_view method) noexcept {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "TRACE";
}

/// Puts `r`'s client on its step of the penalty ladder `ladder` (docs/design.md §16): a ban
/// or a read-only refusal answers at once (true); a pow step asks the gate for a proof; the
/// others act later (throttle: the limits; warn and above: a header).
bool penalize(const setting& s, const request_view& v, const pow::penalty_rules& ladder,
              record& r) {
  r.standing = s.pow.penalties().at(consumer(r), v.now, ladder);
  r.penalty = r.standing.action(ladder);
  switch (r.penalty) {
    case pow::penalty_action::ban: {
      // A ban of a timed step ends with it; one that lasts while the score holds, when the
      // score falls below the step (a decay interval at the most from now, as far as anyone
      // can tell the client).
      const core::nanos end =
          r.standing.until > 0 ? r.standing.until : v.now + ladder.decay_interval;
      r.fx.outcome = core::outcome::banned;
      write_banned(r.reply.body, r.reply.fields, core::ceil_seconds(end - v.now));
      return true;
    }
    case pow::penalty_action::read_only:
      if (safe_method(v.method)) return false;
      r.fx.outcome = core::outcome::denied;
      problem_writer(r.reply.body, 403, "Forbidden")
          .text("detail", "this client may only read for now")
          .text("code", "read_only")
          .finish();
      return true;
    case pow::penalty_action::pow:
      r.gate.require_proof = true;
      return false;
    default:
      return false;
  }
}

/// Scales `r`'s limits by its throttle step's factor (docs/design.md §16), over its tier's;
/// a limit an override gave numbers keeps them.
void throttle(const pow::penalty_rules& ladder, const policy::category_limits& c,
              const std::optional<policy::override_match>& given, record& r) {
  if (c.throttled.empty()) return;
  const pow::penalty_step& step = ladder.steps[static_cast<std::size_t>(r.standing.step)];
  const std::vector<limit::limit_spec>& specs = c.throttled_of(step.variant, r.consumer_tier);
  auto scale = [&](limit::limit_group& g) {
    if (!(given && given->any_spec && given->specs[g.spec->slot] != nullptr)) {
      g.spec = &specs[g.spec->slot];
    }
  };
  for (std::uint8_t i = 0; i < r.limits.group_count; ++i)
    scale(r.limits.groups[i]);
  for (std::uint8_t i = 0; i < r.limits.inflight_count; ++i)
    scale(r.limits.inflight[i]);
  r.limits.overridden = true;  // RateLimit-Policy shows the scaled numbers
}

/// 503 under_attack (docs/design.md §16): attack mode admits only some clients, and `r`'s is
/// not among them. Nothing was charged; Retry-After is one restore step.
step under_attack(const policy::attack_rules& a, record& r) {
  const std::int64_t retry = std::max<std::int64_t>(1, core::ceil_seconds(a.restore_step()));
  r.fx.outcome = core::outcome::under_attack;
  r.fx.upgrade_refused = r.upgrade;
  problem_writer(r.reply.body, 503, "Service Unavailable")
      .text("detail", "under attack: only known clients are admitted for now")
      .text("code", "under_attack")
      .number("retry_after", retry)
      .finish();
  r.reply.fields = "Retry-After: ";
  core::append_decimal(r.reply.fields, retry);
  r.reply.fields += "\r\n";
  return answer_with(r, 503, may_stay(r));
}

/// What attack mode asks of `r` at its category's level (docs/design.md §16): true when it
/// answers 503 at once; a proof of an uncleared client is left to the gate.
bool under_attack_level(const setting& s, const policy::attack_rules& a, record& r) {
  const policy::attack_level_rules& l = a.levels[r.attack.level];
  bool uncleared = true;
  if (l.admit_only || l.pow) uncleared = !(s.gate.has_clearance(r.gate));
  if (l.admit_only) {
    const bool admitted = (l.admit_allowed && r.exempt) || (l.admit_cleared && !uncleared);
    // A level that also asks proofs challenges the others rather than refusing them: a proof
    // earns the clearance that admits.
    if (!admitted && !(l.pow && !r.exempt)) return true;
  }
  if (l.pow && uncleared) r.gate.require_proof = true;
  return false;
}

/// Scales the limits `r` is to be asked by attack mode's factor (docs/design.md §16): the
/// worker's scaled set of its category and tier (made once per factor), or copies of its specs
/// when a limit is not the category's own (an override's, a throttle's) or without a cache.
void scale_for_attack(const setting& s, const std::optional<policy::override_match>& given,
                      record& r) {
  const bool own = !r.limits.overridden && !(given && given->any_spec);
  if (s.scaled != nullptr && own) {
    r.scaled = s.scaled->get(r.category(), r.consumer_tier, r.attack.factor);
    for (std::uint8_t i = 0; i < r.limits.group_count; ++i) {
      limit::limit_group& g = r.limits.groups[i];
      g.spec = &r.scaled->limits[g.spec->slot];
    }
    return;
  }
  for (std::uint8_t i = 0; i < r.limits.group_count; ++i) {
    limit::limit_group& g = r.limits.groups[i];
    r.scaled_copies[i] = *g.spec;
    policy::scale_limit(r.scaled_copies[i], r.attack.factor);
    g.spec = &r.scaled_copies[i];
  }
  r.limits.overridden = true;  // RateLimit-Policy shows the scaled numbers
}

/// Starts `r` afresh for request `v`.
void begin(const request_view& v, record& r) {
  r.route = nullptr;
  r.inflight.release();  // a request that was not ended by its caller
  r.headers = v.headers;
  r.unkeyed = 0;
  r.identity.reset();
  r.token = identity::failure::none;
  r.token_checked = false;
  r.token_cached = false;
  r.consumer_tier = policy::no_tier;
  r.rate.consumer_tier = {};
  r.standing = {};
  r.penalty = pow::penalty_action::none;
  r.attack = {};
  if (r.scaled) r.scaled.reset();
  if (r.overrides) r.overrides.reset();
  r.exempt = false;
  r.upgrade = v.upgrade;
  r.tls = v.tls;
  r.pow_cookie = false;
  r.clearance.clear();
  r.cors = nullptr;
  r.cors_origin = {};
  r.keep_alive = v.keep_alive;
  r.body_done = v.body_done;
  r.verdict.ask_limits = false;
  r.verdict.limits_checked = false;
  r.rate.present = false;
  r.rate.shadow.clear();
  r.reply.body.clear();
  r.reply.fields.clear();
  r.reply.content_type = {};
  r.reply.rate_fields = false;
  r.fx = {};
}

/// Routes `v`: a preflight as the request its script will send, so that the category
/// answering it (and its CORS) is the one that request meets.
const policy::route& route_of(const setting& s, const request_view& v, const record& r,
                              bool preflight) {
  const std::string_view method =
      preflight ? v.headers->value("Access-Control-Request-Method") : v.method;
  return s.router.match({method, r.path, &header_of, v.headers});
}

}  // namespace

step admit(const setting& s, const request_view& v, record& r) {
  begin(v, r);
  if (v.upgrade && v.has_body) return bad_request(r, "a WebSocket upgrade carries no body");
  if (!policy::normalize_path(v.target, r.path)) return bad_request(r, "malformed request target");
  const bool preflight = is_preflight(v);
  r.route = v.route != nullptr ? v.route : &route_of(s, v, r, preflight);
  const policy::category_limits& category = r.category();
  if (const auto* twice = repeated_key_header(category, *v.headers)) {
    return bad_request(
        r, "the header " + twice->key_name + ", which keys a rate limit, is sent more than once");
  }
  r.client = client_address_of(s, v);
  r.who = policy::subjects_of(r.client, s.policy.prefixes());
  if (category.cors) {
    r.cors = &*category.cors;
    const std::string_view origin = v.headers->value("Origin");
    if (r.cors->allows(origin)) r.cors_origin = origin;
  }
  // The access lists come before everything else (docs/design.md §9), the deny list first:
  // a denied client's proof is not even looked at.
  if (core::in_any(s.config.access.deny, r.client)) {
    return refuse(r, core::outcome::denied, 403, "Forbidden", "this address is denied access",
                  "denied");
  }
  r.exempt = core::in_any(s.config.access.allow, r.client);
  // A proof comes in X-PoW-Solution, or from a browser in the cookie its page set; a category
  // without proof of work has no use for one (it is still removed upstream).
  std::string_view solution;
  std::string_view clearance;
  if (category.pow.enabled || category.pow.on_limit) {
    solution = v.headers->value(policy::pow_solution_field);
    if (solution.empty()) {
      solution = cookie_proof(s, v, r);
      r.pow_cookie = !solution.empty();
    }
    // A clearance waives what violations require, never a limit: read where they may.
    if (category.pow.enabled && s.config.pow.clearance.on) clearance = clearance_of(v);
  }
  r.gate = {&category, &r.who, solution, v.now, r.exempt};
  r.gate.clearance = clearance;
  if (r.cors != nullptr && preflight) {
    // Not charged nor challenged (it cannot carry a proof), but a ban holds.
    if (s.gate.screen(r.gate, r.verdict) && r.verdict.result == core::outcome::banned) {
      return conclude(s, r);
    }
    return answer_preflight(v, r);
  }
  if (s.jwt != nullptr && !r.exempt) {
    // A verified token is the consumer's identity (docs/design.md §15); a banned client's
    // token is not even looked at.
    bool twice = false;
    const std::string_view token = token_of(*s.config.identity.jwt, *v.headers, twice);
    if (!token.empty() || twice) {
      // A token the worker remembers as verified goes on (the gate checks bans next); before a
      // signature is checked or a token refused, a banned client gets its 403.
      identity::token_result t;
      const std::int64_t now = v.now / core::ns_per_s;
      const bool known = !twice && s.tokens != nullptr && s.tokens->find(*s.jwt, token, now, t);
      if (!known || t.why != identity::failure::none) {
        if (s.gate.screen(r.gate, r.verdict) && r.verdict.result == core::outcome::banned) {
          return conclude(s, r);
        }
      }
      if (twice) {
        t.why = identity::failure::malformed;
      } else if (!known && s.tokens != nullptr) {
        t = s.tokens->verify(*s.jwt, token, now);
      } else if (!known) {
        auto c = std::make_shared<identity::claims>();
        t.why = s.jwt->verify(token, now, *c);
        if (t.why == identity::failure::none) t.verified = std::move(c);
      }
      r.token = t.why;
      r.identity = std::move(t.verified);
      r.token_checked = true;
      r.token_cached = t.cached;
      if (r.token != identity::failure::none && s.config.identity.jwt->reject_invalid) {
        return unauthorized(s, r);
      }
    }
  }
  const policy::key_sources keys{&header_of, v.headers, v.target,
                                 r.identity ? &r.identity->values : nullptr, v.certificate};
  // The route's policy: the top level's, or that of the host entry the Host named (docs/
  // design.md §15, "Tenants (per Host)"), whose tiers and keys apply.
  const policy::compiled_policy& policy = *r.route->policy;
  // What the admin API's overrides say of this consumer (docs/design.md §15): a tier, or
  // numbers for some of its limits.
  const policy::override_set* overrides =
      s.overrides != nullptr && !r.exempt ? s.overrides->get() : nullptr;
  std::optional<policy::override_match> given;
  if (overrides != nullptr) {
    given.emplace();
    if (!overrides->find(policy, category, r.client, keys, v.now, *given)) given.reset();
  }
  if (const policy::tier_rules* tiers = policy.tiers(); tiers != nullptr && !r.exempt) {
    // The consumer's tier scales its limits and moves its difficulty (docs/design.md §15).
    bool unknown = false;
    r.consumer_tier = policy.tier_of(r.client, keys, unknown, s.tiers_set, consumer(r), v.now,
                                     given ? given->tier : policy::no_tier);
    if (unknown) {
      if (s.gate.screen(r.gate, r.verdict) && r.verdict.result == core::outcome::banned) {
        return conclude(s, r);
      }
      // A key file that rejects what it does not know (docs/design.md §15): nothing goes
      // upstream, so made-up keys buy nothing.
      return refuse(r, core::outcome::unauthorized, 401, "Unauthorized", "this key is not known",
                    "unknown_key");
    }
    r.gate.pow_shift = tiers->pow_bits[r.consumer_tier];
  }
  // The penalty ladder (docs/design.md §16): the client's step, by its identity or address.
  const pow::penalty_rules* ladder = r.exempt ? nullptr : s.policy.penalties();
  if (ladder != nullptr && penalize(s, v, *ladder, r)) {
    r.fx.upgrade_refused = r.upgrade;
    return answer_with(r, 403, may_stay(r));
  }
  // Attack mode (docs/design.md §16): the category's level, read from its board.
  if (category.attack && s.attack != nullptr) {
    r.attack = s.attack->get(category.index);
    if (r.attack.level > 0 && under_attack_level(s, *category.attack, r)) {
      return under_attack(*category.attack, r);
    }
  }
  s.gate.before_limits(r.gate, r.verdict);
  if (!r.verdict.ask_limits) return conclude(s, r);
  r.limits =
      policy.request(category, r.client, keys, r.route->cost, v.now, r.unkeyed, r.consumer_tier);
  if (given && given->any_spec) {
    // An override's numbers replace those of its limits, whatever the tier.
    for (std::uint8_t i = 0; i < r.limits.group_count; ++i) {
      limit::limit_group& g = r.limits.groups[i];
      if (const limit::limit_spec* o = given->specs[g.spec->slot]) g.spec = o;
    }
    r.limits.overridden = true;
    r.overrides = *s.overrides;
  }
  if (r.penalty == pow::penalty_action::throttle) throttle(*ladder, category, given, r);
  if (r.attack.factor < 1) scale_for_attack(s, given, r);
  // Places in flight first: a request refused by them is charged nothing; one the limits
  // refuse gives them back (conclude).
  if (r.limits.inflight_count > 0 && s.inflight != nullptr) {
    if (const limit::limit_spec* full = take_places(s, r)) return too_many_in_flight(r, *full);
  }
  if (r.limits.group_count > 0) return step::ask_store;
  // Nothing to ask (every limit's key missing, or a category without limits): admitted.
  r.decision = limit::decision{};
  r.decision.admitted = true;
  return after_store(s, r);
}

step after_store(const setting& s, record& r) {
  policy::describe(r.limits, r.decision, r.category(), r.client.family(), r.rate, r.scaled.get());
  if (r.consumer_tier != policy::no_tier) {
    r.rate.consumer_tier = r.route->policy->tiers()->names[r.consumer_tier];
  }
  s.gate.after_limits(r.gate, r.limits, r.decision, r.verdict);
  return conclude(s, r);
}

step proof_lost(const setting& s, record& r) {
  s.gate.claim_lost(r.gate, r.verdict);
  return conclude(s, r);
}

step settle_claim(policy::pow_state& pow, const setting& s, step taken, record& r, bool spent) {
  r.verdict.effects.spend = false;
  r.fx.gate.spend = false;
  if (!spent) return proof_lost(s, r);
  if (s.config.pow.clearance.on) earn_clearance(pow, s, r);
  return taken;
}

step spend_claim(policy::pow_state& pow, const setting& s, step taken, record& r) {
  return settle_claim(pow, s, taken, r,
                      policy::commit_proof(pow, r.verdict.sent, r.gate.now / core::ns_per_s));
}

step store_failed(record& r) {
  // Only after ask_store: nothing was concluded, so no effect of the gate's is pending.
  r.inflight.release();
  r.fx.outcome = core::outcome::error;
  problem_writer(r.reply.body, 503, "Service Unavailable")
      .text("detail", "the limiter store did not answer")
      .text("code", "store_unavailable")
      .finish();
  return answer_with(r, 503, may_stay(r));
}

step tunnels_full(record& r) {
  r.inflight.release();
  r.fx.outcome = core::outcome::limited;
  problem_writer(r.reply.body, 429, "Too Many Requests")
      .text("detail", "too many WebSocket connections from this address")
      .text("code", "too_many_connections")
      .number("retry_after", 1)
      .finish();
  r.reply.fields = "Retry-After: 1\r\nX-RateLimit-Reason: too_many_connections\r\n";
  r.reply.content_type = {};
  r.reply.rate_fields = r.verdict.limits_checked;
  return answer_with(r, 429, r.keep_alive);
}

void append_own_fields(const record& r, std::string& out) {
  // A category in attack mode says its level (docs/design.md §16).
  if (r.attack.level > 0) {
    out += "X-Tollgate-Mode: ";
    out += policy::attack_level_names[r.attack.level];
    out += "\r\n";
  }
  // A client on a step of the penalty ladder is told which (docs/design.md §16).
  if (r.penalty != pow::penalty_action::none) {
    out += "X-RateLimit-Warning: ";
    out += pow::penalty_action_name(r.penalty);
    out += "\r\n";
  }
  // A proof sent in the cookie has been judged: the browser is told to drop it.
  if (r.pow_cookie) out += clear_pow_cookie(r.tls);
  // The clearance a proof earned: in a field for API clients, and in a cookie for the browser
  // whose page sent the proof in one (docs/design.md §16).
  if (!r.clearance.empty()) {
    out += policy::clearance_field;
    out += ": ";
    out += r.clearance;
    out += "\r\n";
    if (r.pow_cookie) {
      out += "Set-Cookie: ";
      out += policy::clearance_cookie;
      out += '=';
      out += r.clearance;
      out += "; Path=/; Max-Age=";
      out += std::to_string(r.clearance_seconds);
      out += r.tls ? "; HttpOnly; SameSite=Lax; Secure\r\n" : "; HttpOnly; SameSite=Lax\r\n";
    }
  }
  // A script on an allowed origin may read the gateway's answers (CORS).
  if (r.cors != nullptr) r.cors->append_answer_fields(out, r.cors_origin);
}

}  // namespace tollgate::admission
