// The policy text before and around toml11 (private helpers: policy_parse.hpp): the prescan that
// refuses what toml11 must never see (ill-formed UTF-8, over-long lines, deep nesting, integers
// beyond 64 bits) and the translation of toml11's syntax errors into one-line diagnostics.
#include "policy/policy_parse.hpp"

#include <sstream>

namespace nriqos {

namespace {

/// Length of the UTF-8 sequence starting at s[i] (1-4), or 0 when ill-formed (overlong forms,
/// surrogates and code points above U+10FFFF included; RFC 3629).
size_t utf8_seq(const std::string& s, size_t i) {
    auto u = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
    unsigned c = u(i);
    if (c < 0x80) return 1;
    auto cont = [&](size_t k) { return (u(k) & 0xC0) == 0x80; };
    if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned d = u(i + 1);
        if ((c == 0xE0 && d < 0xA0) || (c == 0xED && d > 0x9F)) return 0;
        return cont(i + 1) && cont(i + 2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned d = u(i + 1);
        if ((c == 0xF0 && d < 0x90) || (c == 0xF4 && d > 0x8F)) return 0;
        return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    }
    return 0;
}

/// An integer literal token (TOML 1.0: decimal with optional sign and '_', or 0x/0o/0b) that does
/// not fit in 64 bits. toml11 would silently wrap it. Dates, times and floats are not integers.
bool int_out_of_range(const std::string& tok) {
    std::string t;
    for (char ch : tok)
        if (ch != '_') t += ch;
    int base = 10;
    size_t i = 0;
    bool neg = false;
    if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'o' || t[1] == 'b')) {
        base = t[1] == 'x' ? 16 : t[1] == 'o' ? 8 : 2;
        i = 2;
    } else if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
        neg = t[0] == '-';
        i = 1;
    }
    if (i >= t.size()) return false;
    uint64_t v = 0;
    for (; i < t.size(); ++i) {
        char ch = t[i];
        int d = isdigit(static_cast<unsigned char>(ch)) ? ch - '0'
                : (base == 16 && isxdigit(static_cast<unsigned char>(ch))) ? 10 + (tolower(ch) - 'a') : -1;
        if (d < 0 || d >= base) return false;  // not an integer literal (float, date, bare key...)
        if (v > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) return true;
        v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
    }
    const uint64_t lim = static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0);
    return v > lim;
}

}  // namespace

/// Checks toml11 (a recursive-descent parser that asserts on some malformed input) must never
/// see fail: ill-formed UTF-8 (TOML documents are UTF-8), lines over 16 KiB, nesting over 32
/// levels, integer literals beyond 64 bits.
void prescan(const Ctx& c, const std::string& text) {
    int depth = 0, line = 1;
    size_t line_start = 0;
    // Where we are: code, a comment, or one of TOML 1.0's four strings ("...", '...', and the
    // multi-line forms, which close on the last three quotes of a run of 3 to 5). A scan by
    // quote parity loses track on '''it's''' and would skip the checks below from there on.
    enum { Code, Comment, Basic, Literal, MlBasic, MlLiteral } st = Code;
    auto run = [&](size_t k, char q) {
        size_t n = 0;
        while (k + n < text.size() && text[k + n] == q) ++n;
        return n;
    };
    auto at = [&](const std::string& m) { c.fail_line(line, m); };
    for (size_t i = 0; i < text.size(); ++i) {
        unsigned char ch = static_cast<unsigned char>(text[i]);
        if (ch >= 0x80) {
            size_t n = utf8_seq(text, i);
            if (n == 0) at("invalid UTF-8");
            i += n - 1;
            continue;
        }
        if (ch == '\n') {
            if (st == Comment || st == Basic || st == Literal) st = Code;  // toml11 reports an unterminated string
            ++line;
            line_start = i + 1;
            continue;
        }
        if (i - line_start > 16384) at("line longer than 16384 bytes");
        if (st == Comment) continue;
        if (st == Basic || st == MlBasic) {
            if (ch == '\\') {
                if (i + 1 < text.size() && text[i + 1] != '\n') ++i;  // skip the escaped character
            } else if (ch == '"' && (st == Basic || run(i, '"') >= 3)) {
                i += (st == Basic ? 1 : run(i, '"')) - 1;
                st = Code;
            }
            continue;
        }
        if (st == Literal || st == MlLiteral) {
            if (ch == '\'' && (st == Literal || run(i, '\'') >= 3)) {
                i += (st == Literal ? 1 : run(i, '\'')) - 1;
                st = Code;
            }
            continue;
        }
        if (ch == '#') {
            st = Comment;  // a comment runs to the end of the line
        } else if (ch == '"' || ch == '\'') {
            bool ml = run(i, static_cast<char>(ch)) >= 3;
            st = ch == '"' ? (ml ? MlBasic : Basic) : (ml ? MlLiteral : Literal);
            if (ml) i += 2;
        } else if (ch == '[' || ch == '{') {
            if (++depth > 32) at("nesting deeper than 32 levels");
        } else if (ch == ']' || ch == '}') {
            if (depth > 0) --depth;
        } else if ((isdigit(ch) || ch == '+' || ch == '-') && (i == 0 || !(isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_' || text[i - 1] == '.' || text[i - 1] == '-'))) {
            size_t j = i;
            while (j < text.size() && (isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_' || text[j] == '+' || text[j] == '-' || text[j] == '.' || text[j] == ':'))
                ++j;
            if (int_out_of_range(text.substr(i, j - i))) at("integer literal out of the 64-bit range");
            i = j - 1;
        }
    }
}

/// toml11's multi-line message ("[error] headline\n --> file\n   |\n 3 | text\n ...") as
/// (line, "TOML syntax error: headline"); line 0 when it names none.
std::pair<int, std::string> toml_error(const std::string& what) {
    std::string head = what.substr(0, what.find('\n'));
    if (head.rfind("[error] ", 0) == 0) head = head.substr(8);
    int line = 0;
    std::istringstream in(what);
    for (std::string l; std::getline(in, l);) {
        size_t bar = l.find(" | ");
        if (bar == std::string::npos) continue;
        std::string num = l.substr(0, bar);
        num.erase(0, num.find_first_not_of(' '));
        if (!num.empty() && num.size() < 9 && num.find_first_not_of("0123456789") == std::string::npos) {
            line = std::stoi(num);
            break;
        }
    }
    return {line, "TOML syntax error: " + head};
}

}  // namespace nriqos
