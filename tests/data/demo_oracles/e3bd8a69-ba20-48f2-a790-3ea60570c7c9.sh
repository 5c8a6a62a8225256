# Solution of the Thunderbird demo: the invoice number Alice's message names, read from the mailbox.
grep -rhoE 'INV-[0-9]{4}-[0-9]{4}' /home/user/.thunderbird | head -n 1 > /home/user/invoice.txt
