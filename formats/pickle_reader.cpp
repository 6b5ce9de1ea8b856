// The strict pickle reader (pickle_reader.h, Note [Strict pickle]): a stack machine over the
// opcodes that build plain data, refusing every other.
#include "formats/pickle_reader.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

namespace dpscope::formats {
namespace {

constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxCopiedValues = 10'000'000;

using PickleJson = nlohmann::json;

// One stack slot: a value, or a MARK.
struct Slot {
  bool mark = false;
  PickleJson value;
};

class Machine {
 public:
  Machine(std::string_view bytes, const std::string& file) : bytes_(bytes), file_(file) {}

  PickleJson run() {
    for (;;) {
      const size_t at = pos_;
      const uint8_t op = byte();
      if (op == '.') return finish(at);  // STOP
      step(op, at);
    }
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& what) const {
    throw PickleError(file_ + ": not a flight-recorder pickle: " + what + " at byte " + std::to_string(at));
  }
  [[noreturn]] void refuse(uint8_t op, size_t at) const {
    char name[64];
    std::snprintf(name, sizeof(name), "opcode 0x%02x%s%c%s", op, op >= 0x20 && op < 0x7f ? " ('" : "",
                  op >= 0x20 && op < 0x7f ? static_cast<char>(op) : ' ', op >= 0x20 && op < 0x7f ? "')" : "");
    fail(at, std::string(name) + ", which builds something other than dicts, lists, tuples, strings, "
                                 "numbers, bools and None (only those are read)");
  }

  uint8_t byte() {
    if (pos_ >= bytes_.size()) fail(pos_, "the file ends before STOP (truncated)");
    return static_cast<uint8_t>(bytes_[pos_++]);
  }
  std::string_view take(uint64_t n) {
    if (n > bytes_.size() - pos_) fail(pos_, "the file ends inside a value (truncated)");
    const std::string_view out = bytes_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  uint64_t little(int n) {
    const std::string_view raw = take(n);
    uint64_t value = 0;
    for (int i = n - 1; i >= 0; --i) value = (value << 8) | static_cast<uint8_t>(raw[i]);
    return value;
  }

  void push(PickleJson value) {
    if (stack_.size() > 1'000'000) fail(pos_, "more than a million values on the stack");
    stack_.push_back(Slot{false, std::move(value)});
  }
  PickleJson pop(size_t at) {
    if (stack_.empty() || stack_.back().mark) fail(at, "an opcode needs a value the stack does not hold");
    PickleJson value = std::move(stack_.back().value);
    stack_.pop_back();
    return value;
  }
  PickleJson& top(size_t at) {
    if (stack_.empty() || stack_.back().mark) fail(at, "an opcode needs a value the stack does not hold");
    return stack_.back().value;
  }
  // The values above the topmost MARK, which is removed.
  std::vector<PickleJson> pop_to_mark(size_t at) {
    size_t mark = stack_.size();
    while (mark > 0 && !stack_[mark - 1].mark) --mark;
    if (mark == 0) fail(at, "no MARK for an opcode that needs one");
    std::vector<PickleJson> items;
    for (size_t i = mark; i < stack_.size(); ++i) items.push_back(std::move(stack_[i].value));
    stack_.resize(mark - 1);
    return items;
  }
  // Each value is walked once when it goes into a container, so the check costs the input's size
  // times its depth at most.
  void check_depth(const std::vector<PickleJson>& items, size_t at) {
    for (const PickleJson& item : items) {
      if (depth(item) + 1 > kMaxDepth) fail(at, "values nested deeper than " + std::to_string(kMaxDepth));
    }
  }
  static size_t count(const PickleJson& value) {
    size_t n = 1;
    if (value.is_structured()) {
      for (const PickleJson& child : value) n += count(child);
    }
    return n;
  }
  static size_t depth(const PickleJson& value) {
    size_t deepest = 0;
    if (value.is_structured()) {
      for (const PickleJson& child : value) deepest = std::max(deepest, depth(child));
      return deepest + 1;
    }
    return 0;
  }
  std::string key_of(PickleJson key, size_t at) {
    if (key.is_string()) return key.get<std::string>();
    if (key.is_number_integer()) return std::to_string(key.get<int64_t>());
    fail(at, "a dict key that is not a string or an integer");
  }
  void set_items(PickleJson& dict, std::vector<PickleJson>& items, size_t at) {
    if (!dict.is_object()) fail(at, "SETITEM(S) on something that is not a dict");
    if (items.size() % 2) fail(at, "SETITEMS with a key and no value");
    check_depth(items, at);
    for (size_t i = 0; i < items.size(); i += 2) dict[key_of(std::move(items[i]), at)] = std::move(items[i + 1]);
  }
  void append_items(PickleJson& list, std::vector<PickleJson>& items, size_t at) {
    if (!list.is_array()) fail(at, "APPEND(S) on something that is not a list");
    check_depth(items, at);
    for (PickleJson& item : items) list.push_back(std::move(item));
  }
  void memo_put(uint64_t index, size_t at) { memo_[index] = top(at); }
  void memo_get(uint64_t index, size_t at) {
    const auto found = memo_.find(index);
    if (found == memo_.end()) fail(at, "a memo entry that was never stored");
    // A memo entry is copied: bound the copies, or a few bytes could ask for gigabytes.
    copied_ += count(found->second);
    if (copied_ > kMaxCopiedValues) fail(at, "memo entries copied more than " + std::to_string(kMaxCopiedValues) + " values");
    push(found->second);
  }
  void step(uint8_t op, size_t at) {
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t version = byte();
        if (version < 2 || version > 5) fail(at, "pickle protocol " + std::to_string(version) + " (2 to 5 are read)");
        return;
      }
      case 0x95: take(8); return;  // FRAME: its length only groups the bytes that follow
      case '(': stack_.push_back(Slot{true, nullptr}); return;  // MARK
      case '}': push(PickleJson::object()); return;   // EMPTY_DICT
      case ']': push(PickleJson::array()); return;    // EMPTY_LIST
      case ')': push(PickleJson::array()); return;    // EMPTY_TUPLE
      case 's': {                               // SETITEM
        PickleJson value = pop(at);
        PickleJson key = pop(at);
        std::vector<PickleJson> items{std::move(key), std::move(value)};
        set_items(top(at), items, at);
        return;
      }
      case 'u': {  // SETITEMS
        std::vector<PickleJson> items = pop_to_mark(at);
        set_items(top(at), items, at);
        return;
      }
      case 'a': {  // APPEND
        std::vector<PickleJson> items{pop(at)};
        append_items(top(at), items, at);
        return;
      }
      case 'e': {  // APPENDS
        std::vector<PickleJson> items = pop_to_mark(at);
        append_items(top(at), items, at);
        return;
      }
      case 't': {  // TUPLE
        std::vector<PickleJson> items = pop_to_mark(at);
        check_depth(items, at);
        PickleJson tuple = PickleJson::array();
        for (PickleJson& item : items) tuple.push_back(std::move(item));
        push(std::move(tuple));
        return;
      }
      case 0x85: case 0x86: case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
        const int n = op - 0x84;
        PickleJson tuple = PickleJson::array();
        std::vector<PickleJson> items;
        for (int i = 0; i < n; ++i) items.insert(items.begin(), pop(at));
        check_depth(items, at);
        for (PickleJson& item : items) tuple.push_back(std::move(item));
        push(std::move(tuple));
        return;
      }
      case 0x94: memo_put(memo_.size(), at); return;  // MEMOIZE
      case 'q': memo_put(byte(), at); return;          // BINPUT
      case 'r': memo_put(little(4), at); return;       // LONG_BINPUT
      case 'h': memo_get(byte(), at); return;          // BINGET
      case 'j': memo_get(little(4), at); return;       // LONG_BINGET
      case 'X': push(std::string(take(little(4)))); return;  // BINUNICODE
      case 0x8c: push(std::string(take(byte()))); return;    // SHORT_BINUNICODE
      case 0x8d: push(std::string(take(little(8)))); return; // BINUNICODE8
      case 'J': push(static_cast<int64_t>(static_cast<int32_t>(little(4)))); return;  // BININT
      case 'K': push(static_cast<int64_t>(byte())); return;                           // BININT1
      case 'M': push(static_cast<int64_t>(little(2))); return;                        // BININT2
      case 0x8a: {  // LONG1: a little-endian two's-complement integer of n bytes
        const uint8_t n = byte();
        if (n > 8) fail(at, "an integer of " + std::to_string(n) + " bytes (up to 8 are read)");
        if (n == 0) {
          push(int64_t{0});
          return;
        }
        uint64_t value = little(n);
        if (n < 8 && (value >> (8 * n - 1)) & 1) value |= ~uint64_t{0} << (8 * n);  // sign-extend
        push(static_cast<int64_t>(value));
        return;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        const std::string_view raw = take(8);
        uint64_t bits = 0;
        for (char c : raw) bits = (bits << 8) | static_cast<uint8_t>(c);
        double value = 0;
        std::memcpy(&value, &bits, sizeof(value));
        push(value);
        return;
      }
      case 'N': push(nullptr); return;  // NONE
      case 0x88: push(true); return;    // NEWTRUE
      case 0x89: push(false); return;   // NEWFALSE
      default: refuse(op, at);
    }
  }

  PickleJson finish(size_t at) {
    if (stack_.size() != 1 || stack_.back().mark) fail(at, "STOP with " + std::to_string(stack_.size()) + " values on the stack (1 expected)");
    if (pos_ != bytes_.size()) fail(pos_, std::to_string(bytes_.size() - pos_) + " bytes after STOP");
    return std::move(stack_.back().value);
  }

  std::string_view bytes_;
  const std::string& file_;
  size_t pos_ = 0;
  std::vector<Slot> stack_;
  std::map<uint64_t, PickleJson> memo_;
  size_t copied_ = 0;
};

}  // namespace

nlohmann::json read_pickle(std::string_view bytes, const std::string& file) {
  if (bytes.empty()) throw PickleError(file + ": not a flight-recorder pickle: the file is empty");
  return Machine(bytes, file).run();
}

}  // namespace dpscope::formats
