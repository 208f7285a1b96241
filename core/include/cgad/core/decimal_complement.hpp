#pragma once
// 1 − x for a hyperparameter x given as decimal text, rounded once from the exact value of that decimal: what the
// fast path's cgad semantics multiplies m and v by (1 − β1, 1 − β2) and powers for the bias corrections
// (docs/design.md §5, "Derived constants and how each is rounded"). Rounding x first and subtracting afterwards is
// the wrong constant: 1 − RN_f(0.999) = 0.00099998712 where 0.999 means 1 − 0.999 = 0.001, a 1.3·10^-5 relative
// error in every v update; torch.optim.Adam forms 1 − β in double from the user's decimal and rounds it once.
#include "cgad/core/real_scalar.hpp"

#include <string_view>

namespace cgad::core {

// The exact decimal 1 − x as text, for x a decimal of the number grammar (real_scalar.hpp) with 0 ≤ x ≤ 1; InputError
// naming `what` for any other text. For 0 < x < 10^-41 it returns "1": 1 − x then lies within 10^-41 of 1, far inside
// half the spacing below 1 of float and double (2^-25, 2^-54), so it rounds to 1 in both, as the exact text would
// (writing that text out would take as many digits as the exponent is large).
std::string one_minus_decimal_text(std::string_view text, std::string_view what);

// 1 − x for the decimal x, correctly rounded to float or double (parse_real of the text above).
template <RealScalar Real>
Real one_minus_decimal(std::string_view text, std::string_view what) {
  return parse_real<Real>(one_minus_decimal_text(text, what), what);
}

}  // namespace cgad::core
