#include "sim/generator.h"
