// Whether a draft model's token ids mean what the target's do: the rule every drafter that
// runs a second model, and the model scanner's draft suggestions, apply. A property of two
// models' vocabularies, so it lives with the models.
#pragma once

#include "model/model.h"

namespace specula {

// Accepts a draft whose tokenizer agrees with the target's on every id both have (the same
// piece) and on BOS/EOS, whatever the embedding row counts. Throws std::invalid_argument
// naming the first id whose piece differs, or what else disagrees.
void check_tokenizers_match(const Model& target, const Model& draft);

}  // namespace specula
