// policy/glob.hpp: the policy's pattern syntax.
#include "policy/glob.hpp"

#include <fnmatch.h>

namespace nriqos {

bool glob_match(const std::string& glob, const std::string& value) {
    if (glob == "*") return true;
    if (glob.find_first_of("*?[") == std::string::npos) return glob == value;
    return fnmatch(glob.c_str(), value.c_str(), 0) == 0;
}

}  // namespace nriqos
