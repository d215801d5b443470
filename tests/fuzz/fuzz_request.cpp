// libFuzzer target: the request parsers (request.hpp parse_v01_request, parse_nri_event) on the
// same bytes. Oracle: InputError with a one-line message, or a Request whose fields respect the
// documented limits (ids [A-Za-z0-9_.-]{1,128}, <= 4096 labels/annotations, keys <= 317 bytes,
// values without NUL, no raw NUL anywhere in the document, a cgroupsPath without control
// characters that resolves below the root or is refused).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.hpp"
#include "model/model.hpp"
#include "model/request.hpp"

namespace {
using nriqos::Request;

void check_id(const std::string& id, const char* what) {
    if (id.empty() || id.size() > nriqos::limits::kMaxIdBytes || id == "." || id == "..") fuzz::die(what, id);
    for (unsigned char c : id)
        if (!(isalnum(c) || c == '-' || c == '_' || c == '.')) fuzz::die(what, id);
}

void check_request(const Request& r) {
    check_id(r.id, "bad id accepted");
    check_id(r.sandbox_id, "bad sandbox id accepted");
    if (r.labels.size() > nriqos::limits::kMaxMapEntries) fuzz::die("too many labels accepted");
    for (const auto* m : {&r.labels, &r.annotations}) {
        for (const auto& [k, v] : *m) {
            if (k.size() > nriqos::limits::kMaxKeyBytes) fuzz::die("long key accepted");
            if (v.find('\0') != std::string::npos) fuzz::die("NUL in value accepted");
        }
    }
    if (r.pid && (*r.pid <= 0 || *r.pid > 4194304)) fuzz::die("pid out of range accepted");
    if (r.cgroups_path) {
        for (unsigned char c : *r.cgroups_path)
            if (c < 0x20 || c == 0x7f) fuzz::die("control character in cgroupsPath accepted");
        try {
            fuzz::check_paths(nriqos::resolve_cgroups_path(*r.cgroups_path));
        } catch (const nriqos::InputError&) {}
    }
}

void one(Request (*parse)(std::string_view), std::string_view in) {
    try {
        Request r = parse(in);
        // A raw NUL is never valid JSON; nlohmann stops at it, so accepting means a tail was ignored.
        if (in.find('\0') != std::string_view::npos) fuzz::die("request with a raw NUL byte accepted");
        check_request(r);
    } catch (const nriqos::InputError& e) {
        std::string m = e.what();
        if (m.empty() || m.find('\n') != std::string::npos) fuzz::die("error message not one line", m);
    }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    one(nriqos::parse_v01_request, in);
    one(nriqos::parse_nri_event, in);
    return 0;
}
