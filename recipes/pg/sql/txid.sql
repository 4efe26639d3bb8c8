SELECT txid_current();
