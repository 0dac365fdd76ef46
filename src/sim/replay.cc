#include "sim/replay.h"
