// Which draft tokens a sequence keeps, as a function of uniforms drawn in advance: the
// decision of compute/acceptance.h (greedy match, rejection sampling, forced acceptance)
// restated so that a device can take it. The host draws, from a copy of each sequence's
// generator, the d + 1 uniforms the CPU path could consume, the device decides with them, and
// the host then advances the generator by draws(): the device accepts exactly what
// accept_greedy, accept_sampled and accept_forced would accept with the same distributions.
//
// The CPU path consumes its uniforms in this order: one per accept test while tokens are
// kept (rejection sampling and forced acceptance), the one that rejects, then one for the
// target's own token (the residual draw after a rejection, the bonus draw after a full
// acceptance; none when that token is an argmax). So the token after `accepted` of d drafts
// is drawn with uniform draw_index(d, accepted). Plain C++; runs on both sides.
#pragma once

#include "host_device.h"

namespace specula::acceptance {

enum class Rule : int { Greedy, Sampled, Forced };

// The uniform the target's own token is drawn with.
SPECULA_HD int draw_index(int d, int accepted) { return accepted < d ? accepted + 1 : d; }

// Uniforms the CPU path consumes (always at most d + 1).
SPECULA_HD int draws(Rule rule, bool greedy_sampling, int d, int accepted) {
  if (rule == Rule::Greedy) return 0;
  if (rule == Rule::Forced && greedy_sampling) return accepted < d ? accepted + 1 : d;  // argmax after the tests
  return draw_index(d, accepted) + 1;
}

struct Decision {
  int accepted;
  int next;
};

// `rows` answers, for verification row j (0 .. d): argmax(j); p(j, t) and q(j, t), the
// target's and the draft's probability of t (q one-hot at the draft token for deterministic
// drafters); draw(j, u), a draw from p_j; draw_residual(j, u), a draw from max(p_j - q_j, 0)
// normalized (from p_j when that is all zero). `u` holds the d + 1 uniforms.
template <typename Rows>
SPECULA_HD Decision decide(Rule rule, bool greedy_sampling, double alpha, int d, const int* draft, const double* u,
                           Rows& rows) {
  int a = 0;
  for (; a < d; ++a) {
    bool keep = false;
    switch (rule) {
      case Rule::Greedy: keep = rows.argmax(a) == draft[a]; break;
      // u < p / q  <=>  u * q < p, which also keeps a token the draft gave zero mass
      case Rule::Sampled: keep = u[a] * static_cast<double>(rows.q(a, draft[a])) < static_cast<double>(rows.p(a, draft[a])); break;
      case Rule::Forced: keep = u[a] < alpha; break;
    }
    if (!keep) break;
  }
  if (rule == Rule::Greedy || (rule == Rule::Forced && greedy_sampling)) return {a, rows.argmax(a)};
  if (rule == Rule::Sampled && a < d) return {a, rows.draw_residual(a, u[draw_index(d, a)])};
  return {a, rows.draw(a, u[draw_index(d, a)])};
}

}  // namespace specula::acceptance
