#include "tools/serve-model/json_reader.h"

#include <charconv>
#include <cmath>
#include <system_error>
#include <vector>

namespace whittle::serve {
namespace {

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Reader {
 public:
  Reader(std::string_view text, JsonEvents* ev, int max_depth)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()), ev_(ev), max_depth_(max_depth) {}

  Status Run() {
    enum class Next { kValue, kAfterValue, kKey };
    Next next = Next::kValue;
    for (;;) {
      SkipWs();
      if (next == Next::kValue) {
        if (p_ == end_) return Syntax("unexpected end of input, expected a value");
        const char c = *p_;
        if (c == '{' || c == '[') {
          if (static_cast<int>(stack_.size()) >= max_depth_)
            return Syntax("nested deeper than " + std::to_string(max_depth_));
          ++p_;
          const bool object = c == '{';
          if (!(object ? ev_->StartObject() : ev_->StartArray())) return Stopped();
          stack_.push_back(object);
          SkipWs();
          if (p_ != end_ && *p_ == (object ? '}' : ']')) {
            ++p_;
            stack_.pop_back();
            if (!(object ? ev_->EndObject() : ev_->EndArray())) return Stopped();
            next = Next::kAfterValue;
          } else {
            next = object ? Next::kKey : Next::kValue;
          }
          continue;
        }
        WH_RETURN_IF_ERROR(Scalar());
        next = Next::kAfterValue;
        continue;
      }
      if (next == Next::kKey) {
        if (p_ == end_ || *p_ != '"') return Syntax("expected a string key");
        WH_RETURN_IF_ERROR(ReadString(&text_));
        if (!ev_->Key(text_)) return Stopped();
        SkipWs();
        if (p_ == end_ || *p_ != ':') return Syntax("expected ':' after a key");
        ++p_;
        next = Next::kValue;
        continue;
      }
      // After a value: the end of the text, or a separator or closer of the open container.
      if (stack_.empty()) {
        if (p_ != end_) return Syntax("unexpected text after the value");
        return Status::Ok();
      }
      const bool object = stack_.back();
      if (p_ == end_) return Syntax(object ? "unexpected end of input, expected ',' or '}'" : "unexpected end of input, expected ',' or ']'");
      if (*p_ == ',') {
        ++p_;
        next = object ? Next::kKey : Next::kValue;
      } else if (*p_ == (object ? '}' : ']')) {
        ++p_;
        stack_.pop_back();
        if (!(object ? ev_->EndObject() : ev_->EndArray())) return Stopped();
      } else {
        return Syntax(object ? "expected ',' or '}'" : "expected ',' or ']'");
      }
    }
  }

 private:
  void SkipWs() {
    while (p_ != end_ && IsWs(*p_)) ++p_;
  }
  size_t Offset() const { return static_cast<size_t>(p_ - begin_); }
  Status Syntax(const std::string& what) const {
    return InvalidArgument("bad JSON at byte " + std::to_string(Offset()) + ": " + what);
  }
  Status Stopped() const {
    return InvalidArgument(ev_->error().empty() ? "bad JSON body" : ev_->error());
  }

  bool Literal(const char* word, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) return false;
    for (size_t i = 0; i < n; ++i)
      if (p_[i] != word[i]) return false;
    p_ += n;
    return true;
  }

  Status Scalar() {
    const char c = *p_;
    if (c == '"') {
      WH_RETURN_IF_ERROR(ReadString(&text_));
      return ev_->String(text_) ? Status::Ok() : Stopped();
    }
    if (c == 't' && Literal("true", 4)) return ev_->Bool(true) ? Status::Ok() : Stopped();
    if (c == 'f' && Literal("false", 5)) return ev_->Bool(false) ? Status::Ok() : Stopped();
    if (c == 'n' && Literal("null", 4)) return ev_->Null() ? Status::Ok() : Stopped();
    if (c == '-' || IsDigit(c)) return Number();
    return Syntax("expected a value");
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, checked while its digits are gathered. Most
  // numbers take Clinger's fast path: at most 19 significant digits whose value is below 2^53 and a
  // power of ten up to 22 are both exact doubles, so one multiply or divide is correctly rounded.
  // The rest go through std::from_chars.
  Status Number() {
    const char* start = p_;
    const char* q = p_;
    const bool negative = q != end_ && *q == '-';
    if (negative) ++q;
    if (q == end_ || !IsDigit(*q)) return Syntax("bad number");
    uint64_t mantissa = 0;
    int digits = 0;      // significant digits gathered into mantissa
    int dropped = 0;     // integer digits past 19 (scale the value up by 10^dropped)
    int fraction = 0;    // fraction digits gathered (scale down)
    auto gather = [&](char c, bool in_fraction) {
      if (digits == 0 && c == '0') {  // leading zeros carry no significance
        if (in_fraction) ++fraction;
        return;
      }
      if (digits < 19) {
        mantissa = mantissa * 10 + static_cast<uint64_t>(c - '0');
        ++digits;
        if (in_fraction) ++fraction;
      } else if (!in_fraction) {
        ++dropped;
      } else {
        digits = 99;  // more precision than the fast path keeps: from_chars decides
      }
    };
    if (*q == '0') {
      ++q;
    } else {
      while (q != end_ && IsDigit(*q)) gather(*q++, false);
    }
    bool integral = true;
    if (q != end_ && *q == '.') {
      integral = false;
      ++q;
      if (q == end_ || !IsDigit(*q)) return Syntax("bad number (no digits after '.')");
      while (q != end_ && IsDigit(*q)) gather(*q++, true);
    }
    int64_t exponent = 0;
    if (q != end_ && (*q == 'e' || *q == 'E')) {
      integral = false;
      ++q;
      bool exp_negative = false;
      if (q != end_ && (*q == '+' || *q == '-')) exp_negative = *q++ == '-';
      if (q == end_ || !IsDigit(*q)) return Syntax("bad number (no digits in the exponent)");
      while (q != end_ && IsDigit(*q)) {
        if (exponent < 100000) exponent = exponent * 10 + (*q - '0');
        ++q;
      }
      if (exp_negative) exponent = -exponent;
    }
    p_ = q;
    if (integral && dropped == 0 && digits <= 18)  // below 10^18: fits int64 either sign
      return ev_->Int(negative ? -static_cast<int64_t>(mantissa) : static_cast<int64_t>(mantissa)) ? Status::Ok()
                                                                                                 : Stopped();
    if (integral) {
      int64_t i = 0;
      auto r = std::from_chars(start, q, i);
      if (r.ec == std::errc() && r.ptr == q) return ev_->Int(i) ? Status::Ok() : Stopped();
      if (!negative) {
        uint64_t u = 0;
        r = std::from_chars(start, q, u);
        if (r.ec == std::errc() && r.ptr == q) return ev_->UInt(u) ? Status::Ok() : Stopped();
      }
    }
    static constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                        1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    const int64_t scale = exponent + dropped - fraction;
    if (digits <= 19 && mantissa <= (uint64_t{1} << 53) && scale >= -22 && scale <= 22) {
      double d = static_cast<double>(mantissa);
      d = scale < 0 ? d / kPow10[-scale] : d * kPow10[scale];
      return ev_->Float(negative ? -d : d) ? Status::Ok() : Stopped();
    }
    double d = 0;
    auto r = std::from_chars(start, q, d);
    if (r.ec != std::errc() || r.ptr != q || !std::isfinite(d)) {
      p_ = start;
      return Syntax("number out of range");
    }
    return ev_->Float(d) ? Status::Ok() : Stopped();
  }

  Status ReadString(std::string* out) {
    out->clear();
    ++p_;  // the opening quote
    for (;;) {
      const char* run = p_;
      while (p_ != end_ && *p_ != '"' && *p_ != '\\' && static_cast<unsigned char>(*p_) >= 0x20) ++p_;
      out->append(run, static_cast<size_t>(p_ - run));
      if (p_ == end_) return Syntax("unterminated string");
      const char c = *p_;
      if (c == '"') {
        ++p_;
        return Status::Ok();
      }
      if (c != '\\') return Syntax("raw control character in a string");
      if (++p_ == end_) return Syntax("unterminated string");
      switch (*p_++) {
        case '"': out->push_back('"'); break;
        case '\\': out->push_back('\\'); break;
        case '/': out->push_back('/'); break;
        case 'b': out->push_back('\b'); break;
        case 'f': out->push_back('\f'); break;
        case 'n': out->push_back('\n'); break;
        case 'r': out->push_back('\r'); break;
        case 't': out->push_back('\t'); break;
        case 'u': {
          uint32_t cp = 0;
          WH_RETURN_IF_ERROR(Hex4(&cp));
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a high surrogate: its low half must follow
            uint32_t lo = 0;
            if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return Syntax("unpaired surrogate in a string");
            p_ += 2;
            WH_RETURN_IF_ERROR(Hex4(&lo));
            if (lo < 0xDC00 || lo > 0xDFFF) return Syntax("unpaired surrogate in a string");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Syntax("unpaired surrogate in a string");
          }
          AppendUtf8(out, cp);
          break;
        }
        default:
          --p_;
          return Syntax("bad escape in a string");
      }
    }
  }

  Status Hex4(uint32_t* cp) {
    if (end_ - p_ < 4) return Syntax("bad \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = HexValue(p_[i]);
      if (h < 0) return Syntax("bad \\u escape");
      v = v * 16 + static_cast<uint32_t>(h);
    }
    p_ += 4;
    *cp = v;
    return Status::Ok();
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  JsonEvents* ev_;
  int max_depth_;
  std::vector<bool> stack_;  // open containers: true = object
  std::string text_;         // the last string or key read
};

}  // namespace

Status ReadJson(std::string_view text, JsonEvents* events, int max_depth) {
  return Reader(text, events, max_depth).Run();
}

}  // namespace whittle::serve
