// libFuzzer target: OCI cgroupsPath resolution (model.hpp resolve_cgroups_path), both the
// cgroupfs form and the systemd "slice:prefix:name" form. Oracle: either InputError, or paths
// that cannot leave the hierarchy root (fuzz_common.hpp check_paths).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "model/model.hpp"
#include "model/request.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string in(reinterpret_cast<const char*>(data), size);
    try {
        nriqos::CgroupPaths p = nriqos::resolve_cgroups_path(in);
        fuzz::check_paths(p);
        (void)nriqos::kube_qos_from_path(p.pod);
    } catch (const nriqos::InputError& e) {
        std::string m = e.what();
        if (m.empty() || m.find('\n') != std::string::npos) fuzz::die("error message not one line", m);
    }
    return 0;
}
