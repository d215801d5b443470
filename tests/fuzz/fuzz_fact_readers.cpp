// libFuzzer target: the fact readers (src/facts/fact_readers.hpp) and the CPU-set list format
// (src/os/cpuset.hpp) on hostile annotation values, rubik's volcano.sh/blkio-limit and the
// blkio_throttle value syntax (src/model/knobs.hpp). The first byte picks the reader, the rest is the
// value. Oracles: every error is one non-empty line; values stay within their bounds; a CPU set
// prints in canonical form and parses back to itself; an integer quantity equals its digits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "os/cpuset.hpp"
#include "facts/fact_readers.hpp"
#include "fuzz_common.hpp"
#include "model/knobs.hpp"
#include "model/request.hpp"

namespace {
void one_line(const std::string& m, const char* what) {
    if (m.empty() || m.find('\n') != std::string::npos) fuzz::die(what, m);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const unsigned sel = data[0] % 7;
    std::string in(reinterpret_cast<const char*>(data + 1), size - 1);
    using namespace nriqos;
    try {
        switch (sel) {
            case 0: {  // Quantity
                std::string why;
                auto v = parse_quantity(in, &why);
                if (!v) {
                    one_line(why, "quantity error");
                    break;
                }
                if (*v > kMaxQuantityValue || *v < -kMaxQuantityValue) fuzz::die("quantity out of bounds", in);
                bool digits = !in.empty() && in.size() <= 18 && in.find_first_not_of("0123456789") == std::string::npos;
                if (digits && *v != std::strtoll(in.c_str(), nullptr, 10)) fuzz::die("integer quantity differs from its digits", in);
                if (milli_cpu_to_shares(*v) < 2 || milli_cpu_to_shares(*v) > 262144) fuzz::die("shares out of range", in);
                int64_t q = milli_cpu_to_quota(*v);
                if (q != -1 && q < 1000) fuzz::die("quota below 1000", in);
                break;
            }
            case 1: {  // extended-resource-spec
                ExtendedResourceSpec e = parse_extended_resource_spec(in);
                if (!e.present && !e.containers.empty()) fuzz::die("containers without presence");
                if (e.containers.size() > 4096) fuzz::die("more than 4096 containers");
                for (const auto& [n, b] : e.containers)
                    for (const auto* v : {&b.cpu_request, &b.cpu_limit, &b.mem_request, &b.mem_limit})
                        if (*v && (**v > kMaxQuantityValue || **v < -kMaxQuantityValue)) fuzz::die("batch quantity out of bounds", n);
                break;
            }
            case 2: {  // resource-status cpuset
                std::string s = parse_resource_status_cpuset(in);
                if (!s.empty() && !CpuSet::parse(s)) fuzz::die("resource-status returned an invalid cpuset", s);
                break;
            }
            case 3: {  // Katalyst enhancement map
                std::string why;
                auto m = parse_string_map(in, &why);
                if (!m) one_line(why, "string map error");
                break;
            }
            case 4: {  // CPU list round trip
                std::string why;
                auto c = CpuSet::parse(in, &why);
                if (!c) {
                    one_line(why, "cpuset error");
                    break;
                }
                auto again = CpuSet::parse(c->str());
                if (!again || *again != *c || again->str() != c->str()) fuzz::die("cpuset does not round-trip", in);
                if (c->count() != c->ids().size()) fuzz::die("cpuset count");
                break;
            }
            case 5: {  // Go ParseBool / ParseInt
                auto b = go_parse_bool(in);
                if (b && in.size() > 5) fuzz::die("ParseBool accepted a long string", in);
                auto i = go_parse_int(in);
                if (i) {
                    size_t k = !in.empty() && (in[0] == '+' || in[0] == '-') ? 1 : 0;
                    if (k == in.size() || in.find_first_not_of("0123456789", k) != std::string::npos) fuzz::die("ParseInt accepted non-digits", in);
                    if ((*i < 0) != (in[0] == '-' && in.find_first_not_of("0", 1) != std::string::npos)) fuzz::die("ParseInt sign", in);
                }
                break;
            }
            case 6: {  // rubik volcano.sh/blkio-limit; the throttle list syntax round trip
                try {
                    BlkioLimit b = parse_blkio_limit(in);
                    for (const auto& l : b.lists)
                        if (l.size() > kMaxBlkioDevices) fuzz::die("more blkio devices than the bound");
                } catch (const InputError& x) { one_line(x.what(), "blkio-limit error"); }
                std::vector<ThrottleEntry> e, again;
                std::string err;
                if (!parse_throttle(in, e, err)) {
                    one_line(err, "throttle error");
                    break;
                }
                if (e.size() > kMaxThrottleEntries) fuzz::die("more throttle entries than the bound");
                if (!parse_throttle(throttle_text(e), again, err) || throttle_text(again) != throttle_text(e))
                    fuzz::die("throttle does not round-trip", in);
                for (const auto& t : e)
                    if (t.rate == 0 || t.rate > static_cast<uint64_t>(INT64_MAX)) fuzz::die("throttle rate out of range", in);
                break;
            }
        }
    } catch (const InputError& e) { one_line(e.what(), "reader error"); }
    return 0;
}
