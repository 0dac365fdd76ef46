#include "apps/tessera/commands.h"

namespace tessera {

void AddDemoCommand(CLI::App& app, int& rc) {
  (void)app;
  (void)rc;
}

}  // namespace tessera
