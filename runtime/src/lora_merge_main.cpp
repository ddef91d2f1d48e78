// OUT/train merge-lora: a LoRA checkpoint merged into a Hugging Face folder (megart/lora_merge.h).
#include "megart/error.h"
#include "megart/lora_merge.h"
#include "megart/train_checkpoint.h"

#include <CLI/CLI.hpp>

namespace megart {

int merge_lora_main(int argc, const char *const *argv, const ProgramDesc &program, std::ostream &out,
                    std::ostream &err) {
  CLI::App app{"Merges LoRA adapters (a megac LoRA checkpoint's or a folder PEFT saved) into their base model: a Hugging Face folder"};
  std::string load, save, base;
  app.add_option("--load", load,
                 "The LoRA checkpoint folder (its latest iteration), an iteration folder, or a PEFT adapter folder")
      ->required();
  app.add_option("--save", save, "The new folder of the merged model (config.json, model.safetensors, tokenizer)")
      ->required();
  app.add_option("--pretrained-checkpoint", base,
                 "The base model (default: the files the checkpoint's train_state.json names, or the "
                 "base_model_name_or_path of a PEFT folder)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e, out, err);
  } catch (const CLI::ParseError &e) {
    err << "error: " << e.what() << "\nRun with --help to list the flags.\n" << std::flush;
    return 1;
  }
  try {
    const LoadSource source = resolve_load(load, -1, /*with_optimizer=*/false);
    if (!source.adapters)
      throw Error("--load " + load + " is not a megac LoRA checkpoint (a folder with adapter_config.json, "
                  "adapter_model.safetensors and train_state.json) nor a PEFT adapter folder: nothing to merge");
    // A folder PEFT saved has no record of its run: its settings must be ones this program computes
    // (a merge of DoRA or biased adapters by LoRA's formula would be another model).
    if (!source.resume)
      check_load_against_program(source, program, "--load " + load);
    const std::vector<std::string> base_files = checkpoint_base_weights(source, load, base);
    const MergeReport r = merge_lora(source.folder, base_files, save);
    out << "merged " << r.merged << " adapted weights of " << r.tensors << " tensors into " << save
        << "/model.safetensors (base: " << base_files.front() << (base_files.size() > 1 ? " and more" : "")
        << "; adapters: " << source.folder << ")" << std::endl;
    return 0;
  } catch (const Error &e) {
    err << "error: " << e.what() << std::endl;
    return 1;
  }
}

} // namespace megart
