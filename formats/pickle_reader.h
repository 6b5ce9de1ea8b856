// A small, strict reader of Python pickles: the subset PyTorch's flight recorder writes when it
// dumps its dict (protocols 2 to 5: dicts, lists, tuples, strings, ints, floats, bools, None),
// read into a JSON value. Anything else is refused in one line naming the file and the opcode.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace dpscope::formats {

// A pickle the reader refuses: names the file, the byte offset and what is wrong.
class PickleError : public std::runtime_error {
 public:
  explicit PickleError(const std::string& message) : std::runtime_error(message) {}
};

// Note [Strict pickle]
// A pickle is a program for a stack machine, and a general unpickler runs whatever it says
// (GLOBAL and REDUCE call any Python function). This reader runs only the opcodes that build
// plain data: PROTO, FRAME, STOP, MARK, the containers (EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE,
// TUPLE, TUPLE1-3, SETITEM(S), APPEND(S)), the memo (MEMOIZE, BINPUT, LONG_BINPUT, BINGET,
// LONG_BINGET), strings (BINUNICODE, SHORT_BINUNICODE, BINUNICODE8), numbers (BININT,
// BININT1, BININT2, LONG1 up to 8 bytes, BINFLOAT) and NONE, NEWTRUE, NEWFALSE. A tuple is read
// as a JSON array; a dict key must be a string or an integer (written as its decimal text). It
// refuses any other opcode, a truncated or overlong input, a stack that does not end in one
// value, and nesting deeper than 64, so a damaged or hostile file costs a line, never a crash.

// Reads `bytes` (the whole file `file`, for messages). Throws PickleError. Pure.
nlohmann::json read_pickle(std::string_view bytes, const std::string& file);

}  // namespace dpscope::formats
