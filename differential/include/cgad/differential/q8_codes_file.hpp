#pragma once
// The q8 maps' codes from a JSON file (`cgad replay --q8-maps FILE`, fastpath::StepConfig::q8_codes): the document
// `cgad codebook --json` prints, or any of its shape: {"signed": M, "unsigned": M}, each M an array of 256 codes or
// an object whose "hex" array holds them (the codebook's). A code is a string, a hexfloat or a decimal, or a number;
// a hexfloat or a number must be a float32 value exactly, a decimal is read correctly rounded to float32 (the
// codebook's shortest decimals name their floats). Other keys (the codebook's "source", "zero_free") are not read;
// the fast path checks the codes themselves (fastpath::validate).
#include "cgad/fastpath/config.hpp"

#include <istream>
#include <string>

namespace cgad::differential {

// The codes of the document read from `in` to its end; InputError naming `where` (the file) for a document that is
// not JSON of that shape or holds another value.
fastpath::Q8Codes read_q8_codes(std::istream& in, const std::string& where);

}  // namespace cgad::differential
