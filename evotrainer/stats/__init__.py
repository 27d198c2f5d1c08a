"""Did the gain hold? Paired bootstrap intervals (``bootstrap``), the final best against the best seed on
selection and held-out items (``generalisation``), on real items no selection used (``transfer``), pooled over
a sweep's seeds (``transfer_pool``), and the ablation study's table (``ablation``). Numbers in, records out:
no model, archive or search here."""
