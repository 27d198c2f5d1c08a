"""LoRA adapter mechanics: SFT data, replay batches, training, crossover, noise mutation, export."""

from evotrainer.adapters.batches import BatchRow, plan_batches, replay_share
from evotrainer.adapters.export import export_policy
from evotrainer.adapters.merge import cx_adapters
from evotrainer.adapters.perturb import mut_adapter_noise
from evotrainer.adapters.sft_data import IGNORE_INDEX, EncodedExample, collate, encode_chat
from evotrainer.adapters.train import SFTExample, TrainResult, train_lora
from evotrainer.backends.adapter_files import ADAPTER_META_FILE, LoraFactors, read_adapter, write_adapter
from evotrainer.model_schema import LoraSettings

__all__ = ["ADAPTER_META_FILE", "IGNORE_INDEX", "BatchRow", "EncodedExample", "LoraFactors", "LoraSettings",
           "SFTExample", "TrainResult", "collate", "cx_adapters", "encode_chat", "export_policy",
           "mut_adapter_noise", "plan_batches", "read_adapter", "replay_share", "train_lora", "write_adapter"]
