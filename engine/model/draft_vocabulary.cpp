#include "model/draft_vocabulary.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/tokenizer.h"

namespace specula {

void check_tokenizers_match(const Model& target, const Model& draft) {
  if (!target.tokenizer || !draft.tokenizer) {
    if (target.tokenizer || draft.tokenizer) {
      throw std::invalid_argument("only one of the target and draft models has a tokenizer: cannot check they agree");
    }
    // without vocabularies the ids can only be trusted when the tables are the same
    if (target.config.vocab_size != draft.config.vocab_size) {
      throw std::invalid_argument("the draft model has " + std::to_string(draft.config.vocab_size) +
                                  " embedding rows, the target " + std::to_string(target.config.vocab_size) +
                                  ", and neither has a tokenizer to show their ids agree");
    }
    return;
  }
  const Tokenizer& a = *target.tokenizer;
  const Tokenizer& b = *draft.tokenizer;
  if (a.model() != b.model()) {
    throw std::invalid_argument(std::string("incompatible draft tokenizer: ") + b.model_name() +
                                " in the draft model, " + a.model_name() + " in the target");
  }
  // Ids only one vocabulary has are padding rows or extra tokens: the draft never proposes
  // an id the target lacks (ModelDrafter masks them), the rest must mean the same.
  const int common = std::min(a.size(), b.size());
  for (int id = 0; id < common; ++id) {
    if (a.piece(id) != b.piece(id)) {
      throw std::invalid_argument("incompatible draft tokenizer: token " + std::to_string(id) + " is '" +
                                  b.piece(id) + "' in the draft model but '" + a.piece(id) + "' in the target");
    }
  }
  if (a.bos() != b.bos() || a.eos() != b.eos()) {
    throw std::invalid_argument("incompatible draft tokenizer: BOS/EOS ids (" + std::to_string(b.bos()) + ", " +
                                std::to_string(b.eos()) + ") differ from the target's (" + std::to_string(a.bos()) +
                                ", " + std::to_string(a.eos()) + ")");
  }
}

}  // namespace specula
