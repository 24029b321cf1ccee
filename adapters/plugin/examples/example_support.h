/* adapters/plugin/examples/example_support.h: what every example plugin
 * answers the same way: a status with its message, and negotiation.
 *
 * Header-only and static, so each example still builds as one file a plugin
 * author can copy with this header beside it.
 */
#ifndef ORTMEM_NXMEM_EXAMPLE_SUPPORT_H
#define ORTMEM_NXMEM_EXAMPLE_SUPPORT_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nxmem/nxmem_abi.h"

/* A status with `message` cut at the ABI's 255 bytes, NUL-terminated. */
static inline NxmemStatus example_status(uint32_t code, const char* message) {
  NxmemStatus out;
  memset(&out, 0, sizeof out);
  out.code = code;
  size_t length = strlen(message);
  if (length > NXMEM_STATUS_MESSAGE_MAX) length = NXMEM_STATUS_MESSAGE_MAX;
  memcpy(out.message, message, length);
  out.message_len = (uint32_t)length;
  return out;
}

/* Messages carry numbers (sizes, offsets, errno text) so a report stands on
 * its own; vsnprintf cuts at the ABI's limit and keeps the NUL. */
#if defined(__GNUC__)
static inline NxmemStatus example_statusf(uint32_t code, const char* format, ...) __attribute__((format(printf, 2, 3)));
#endif
static inline NxmemStatus example_statusf(uint32_t code, const char* format, ...) {
  char text[NXMEM_STATUS_MESSAGE_MAX + 1];
  va_list args;
  va_start(args, format);
  vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return example_status(code, text);
}

static inline NxmemStatus example_ok(void) { return example_status(NXMEM_STATUS_OK, ""); }

/* The plugin's side of negotiation, for a plugin of major 1 speaking minors
 * plugin_minor_min..plugin_minor_max and offering `capabilities`: the
 * response is zeroed and plugin_range always filled; SHORT_STRUCT for a short
 * request, VERSION_MISMATCH when the majors do not meet or the agreed minor
 * (the smaller maximum) falls under either minimum, UNSUPPORTED_CAPABILITY
 * when the host takes no allocator. Offered: plugin ∧ host ∧ known, less
 * the bits above the agreed minor. */
static inline NxmemStatus example_negotiate(const char* name, uint32_t plugin_minor_min, uint32_t plugin_minor_max,
                                            uint64_t capabilities, const NxmemNegotiateRequest* request,
                                            NxmemNegotiateResponse* response) {
  if (request == NULL || response == NULL)
    return example_statusf(NXMEM_STATUS_INVALID_ARGUMENT, "%s: null argument", name);
  memset(response, 0, sizeof *response);
  response->struct_size = sizeof *response;
  const NxmemVersionRange plugin = {1, 1, plugin_minor_min, plugin_minor_max};
  response->plugin_range = plugin;
  if (request->struct_size < sizeof(NxmemNegotiateRequest)) {
    return example_statusf(NXMEM_STATUS_SHORT_STRUCT, "%s: the request is %u bytes, under 32", name,
                           request->struct_size);
  }
  const NxmemVersionRange host = request->host_range;
  if (host.major_min > plugin.major_max || host.major_max < plugin.major_min) {
    return example_statusf(NXMEM_STATUS_VERSION_MISMATCH, "%s: speaks major 1 only", name);
  }
  const uint32_t minor = host.minor_max < plugin.minor_max ? host.minor_max : plugin.minor_max;
  if (minor < host.minor_min || minor < plugin.minor_min) {
    return example_statusf(NXMEM_STATUS_VERSION_MISMATCH, "%s: speaks minors 1.%u to 1.%u only", name, plugin_minor_min,
                           plugin_minor_max);
  }
  uint64_t flags = capabilities & request->host_capability_flags & NXMEM_CAP_KNOWN_MASK;
  if (minor < 1) flags &= ~NXMEM_CAP_STRUCTURED_RELEASE;
  if ((flags & NXMEM_CAP_ALLOCATOR) == 0) {
    return example_statusf(NXMEM_STATUS_UNSUPPORTED_CAPABILITY, "%s: the host does not take allocators", name);
  }
  response->agreed_major = 1;
  response->agreed_minor = minor;
  response->capability_flags = flags;
  return example_ok();
}

#endif /* ORTMEM_NXMEM_EXAMPLE_SUPPORT_H */
