// The payments workflow's values, with the Python dataclasses' field names (examples/payments).
export interface PaymentRequest {
  customer: string;
  invoices: string[];
}

export interface Invoice {
  number: string;
  amount_cents: number;
}

export interface Charge {
  charge_id: number;
  invoice: string;
  amount_cents: number;
}

export interface ChargeInput {
  customer: string;
  invoice: Invoice;
}

export interface ReceiptInput {
  customer: string;
  charges: Charge[];
}
