#include "ortmem/context_pin.hpp"

namespace ortmem {

std::string ProviderContextPinError::message() const {
  switch (kind) {
    case Kind::kContextUnavailable:
      return "provider context " + to_string(context) +
             " is no longer accepting work (retiring, lost or terminated); do not queue work on it: "
             "release through the normal path instead";
    case Kind::kPinCountOverflow:
      return "provider context " + to_string(context) +
             " has too many outstanding pins; the pin was refused rather than wrapping the count: "
             "settle outstanding deferred releases before queuing more";
  }
  return "unknown provider context pin error";
}

}  // namespace ortmem
