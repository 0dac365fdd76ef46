#include "apps/tessera/commands.h"

namespace tessera {

void AddSimReplayCommand(CLI::App& sim, int& rc) {
  (void)sim;
  (void)rc;
}

}  // namespace tessera
