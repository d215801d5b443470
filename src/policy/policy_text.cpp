// The policy text before and around toml11 (private helpers: policy_parse.hpp): the prescan that
// refuses what toml11 must never see (ill-formed UTF-8, over-long lines, deep nesting, integers
// beyond 64 bits), the translation of toml11's syntax errors into one-line diagnostics, and
// read_fail_mode (policy.hpp), settings.fail read ahead of a compile.
#include "policy/policy_parse.hpp"

#include <cstring>
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
        int d = isdigit(static_cast<unsigned char>(ch))                    ? ch - '0'
                : (base == 16 && isxdigit(static_cast<unsigned char>(ch))) ? 10 + (tolower(ch) - 'a')
                                                                           : -1;
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
        } else if ((isdigit(ch) || ch == '+' || ch == '-') && (i == 0 || !(isalnum(static_cast<unsigned char>(text[i - 1])) || text[i - 1] == '_' ||
                                                                           text[i - 1] == '.' || text[i - 1] == '-'))) {
            size_t j = i;
            while (j < text.size() && (isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_' || text[j] == '+' || text[j] == '-' ||
                                       text[j] == '.' || text[j] == ':'))
                ++j;
            if (int_out_of_range(text.substr(i, j - i))) at("integer literal out of the 64-bit range");
            i = j - 1;
        }
    }
}

namespace {

/// The first pass of read_fail_mode: a TOML 1.0 reader of keys and strings only. It follows the
/// document's structure (table headers, dotted keys, inline tables, arrays, the four string forms,
/// comments) to know the full key of each value, decodes strings (escapes included), and skips
/// every other value as a run of characters. It is more lenient than toml11 (what it accepts
/// beyond TOML never matters: the compile rejects such a file), never stricter: it gives up
/// (`lost`) only on text that is not TOML. One pass, no allocation beyond the current key path
/// and the strings it decodes; nesting is bounded (32 levels, as the prescan's).
struct FailScan {
    const std::string& t;
    size_t i = 0;
    bool lost = false;  ///< not TOML from here on
    bool found = false;  ///< settings.fail seen (`value`, or `bad` when not a string)
    bool bad = false;
    std::string value;

    char at(size_t k) const { return k < t.size() ? t[k] : '\0'; }
    bool end() const { return i >= t.size(); }
    void ws() {
        while (!end() && (t[i] == ' ' || t[i] == '\t')) ++i;
    }
    /// Whitespace, newlines and comments (between expressions, inside arrays; also inside
    /// inline tables, which TOML 1.0 keeps on one line: lenient).
    void ws_nl() {
        while (!end()) {
            char c = t[i];
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
                ++i;
            } else if (c == '#') {
                while (!end() && t[i] != '\n') ++i;
            } else {
                break;
            }
        }
    }
    bool fail() {
        lost = true;
        return false;
    }
    static void put_utf8(std::string& out, uint32_t cp) {
        if (cp < 0x80) {
            out += char(cp);
        } else if (cp < 0x800) {
            out += char(0xC0 | (cp >> 6));
            out += char(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += char(0xE0 | (cp >> 12));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        } else {
            out += char(0xF0 | (cp >> 18));
            out += char(0x80 | ((cp >> 12) & 0x3F));
            out += char(0x80 | ((cp >> 6) & 0x3F));
            out += char(0x80 | (cp & 0x3F));
        }
    }
    /// One escape of a basic string at t[i] == '\\' (TOML 1.0, and 1.1's \e and \xHH).
    bool escape(std::string& out) {
        char c = at(i + 1);
        static const char kFrom[] = "btnfr\"\\e", kTo[] = "\b\t\n\f\r\"\\\x1b";
        if (const char* p = c ? std::strchr(kFrom, c) : nullptr) {
            out += kTo[p - kFrom];
            i += 2;
            return true;
        }
        size_t digits = c == 'u' ? 4 : c == 'U' ? 8 : c == 'x' ? 2 : 0;
        if (!digits) return fail();
        uint32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
            char h = at(i + 2 + k);
            if (!isxdigit(static_cast<unsigned char>(h))) return fail();
            cp = cp * 16 + uint32_t(isdigit(static_cast<unsigned char>(h)) ? h - '0' : tolower(h) - 'a' + 10);
        }
        if (cp > 0x10FFFF) return fail();
        put_utf8(out, cp);
        i += 2 + digits;
        return true;
    }
    /// A string at t[i] (one of the four forms), decoded into `out`. `key`: single-line only.
    bool string(std::string& out, bool key) {
        const char q = t[i];
        const bool ml = at(i + 1) == q && at(i + 2) == q;
        if (ml && key) return fail();
        i += ml ? 3 : 1;
        if (ml) {  // a newline right after the opening delimiter is trimmed
            if (at(i) == '\n') ++i;
            else if (at(i) == '\r' && at(i + 1) == '\n') i += 2;
        }
        while (!end()) {
            char c = t[i];
            if (c == q) {
                if (!ml) {
                    ++i;
                    return true;
                }
                size_t run = 0;
                while (at(i + run) == q) ++run;
                if (run >= 3) {  // the last three of a run of 3 to 5 close it
                    if (run > 5) return fail();
                    out.append(run - 3, q);
                    i += run;
                    return true;
                }
                out.append(run, q);
                i += run;
                continue;
            }
            if (c == '\n' && !ml) return fail();
            if (c == '\\' && q == '"') {
                size_t k = i + 1;
                while (ml && (at(k) == ' ' || at(k) == '\t')) ++k;
                if (ml && (at(k) == '\n' || (at(k) == '\r' && at(k + 1) == '\n'))) {  // line-ending backslash
                    i = k;
                    while (!end() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\r' || t[i] == '\n')) ++i;
                    continue;
                }
                if (!escape(out)) return false;
                continue;
            }
            out += c;
            ++i;
        }
        return fail();  // unterminated
    }
    /// A key (bare, quoted or dotted) appended to `path`.
    bool key(std::vector<std::string>& path) {
        for (;;) {
            ws();
            char c = at(i);
            if (c == '"' || c == '\'') {
                std::string k;
                if (!string(k, true)) return false;
                path.push_back(std::move(k));
            } else {
                size_t b = i;
                while (!end() && (isalnum(static_cast<unsigned char>(t[i])) || t[i] == '_' || t[i] == '-')) ++i;
                if (i == b) return fail();
                path.emplace_back(t, b, i - b);
            }
            ws();
            if (at(i) != '.') return true;
            ++i;
        }
    }
    static bool is_settings_fail(const std::vector<std::string>& p) { return p.size() == 2 && p[0] == "settings" && p[1] == "fail"; }
    /// A value at t[i] whose full key is `path` (`in_array`: an element of an array, or inside one).
    bool val(std::vector<std::string>& path, bool in_array, int depth) {
        if (depth > 32) return fail();
        const bool watched = !in_array && is_settings_fail(path);
        char c = at(i);
        if (c == '"' || c == '\'') {
            std::string s;
            if (!string(s, false)) return false;
            if (watched) {
                found = true;
                value = std::move(s);
            }
            return true;
        }
        if (watched) {  // settings.fail that is no string: the compile refuses it
            found = bad = true;
            return true;
        }
        if (c == '[') {
            ++i;
            for (;;) {
                ws_nl();
                if (at(i) == ']') break;
                if (!val(path, true, depth + 1)) return false;
                if (found) return true;
                ws_nl();
                if (at(i) == ',') {
                    ++i;
                    continue;
                }
                if (at(i) != ']') return fail();
                break;
            }
            ++i;
            return true;
        }
        if (c == '{') {
            ++i;
            for (;;) {
                ws_nl();
                if (at(i) == '}') break;
                const size_t n = path.size();
                if (!key(path)) return false;
                if (at(i) != '=') return fail();
                ++i;
                ws();
                bool ok = val(path, in_array, depth + 1);
                path.resize(n);
                if (!ok) return false;
                if (found) return true;
                ws_nl();
                if (at(i) == ',') {
                    ++i;
                    continue;
                }
                if (at(i) != '}') return fail();
                break;
            }
            ++i;
            return true;
        }
        // Any other value (integer, float, boolean, date-time with its inner space): up to
        // where the value ends.
        size_t b = i;
        while (!end() && !std::strchr(",]}#\r\n", t[i])) ++i;
        return i > b || fail();
    }
    /// The document: each line a table header or a key = value (with its comment).
    void run() {
        std::vector<std::string> table, path;
        if (t.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // a UTF-8 BOM
        for (;;) {
            ws_nl();
            if (end()) return;
            if (t[i] == '[') {
                const bool arr = at(i + 1) == '[';
                i += arr ? 2 : 1;
                table.clear();
                if (!key(table)) return;
                if (at(i) != ']' || (arr && at(i + 1) != ']')) return void(fail());
                i += arr ? 2 : 1;
            } else {
                path = table;
                if (!key(path)) return;
                if (at(i) != '=') return void(fail());
                ++i;
                ws();
                if (!val(path, false, 0)) return;
                if (found) return;
            }
            ws();
            if (!end() && t[i] != '\n' && t[i] != '\r' && t[i] != '#') return void(fail());
        }
    }
};

}  // namespace

std::optional<bool> read_fail_mode(const std::string& text) {
    FailScan s{text};
    s.run();
    if (s.found) {
        if (s.bad) return std::nullopt;
        if (s.value == "closed") return true;
        if (s.value == "open") return false;
        return std::nullopt;
    }
    if (s.lost) return std::nullopt;
    return false;  // no settings.fail: the default, "open"
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
