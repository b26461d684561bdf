/**
 * US area codes → the time zones their numbers may be in, and the area codes of the states whose
 * calling hours end early.
 *
 * Source: Google libphonenumber's `resources/timezones/map_data.txt` (Apache-2.0, "internal
 * statistics data" of 2018-06-12), folded to the area code: an area code whose exchanges lie in
 * several zones lists all of them (219, 270, 423, 574, 606, 812, 850 and 906 span Eastern and
 * Central; 308, 605, 620, 701 and 785 Central and Mountain; 208, 541, 775 and 986 Mountain and
 * Pacific; Arizona's codes Arizona time and Mountain time with daylight saving, for the Navajo
 * Nation). Overlays assigned after 2018 are added with the zones of the area they overlay, and
 * 689 (Orlando, shown as Central in the 2018 data, before it was in service) is Eastern.
 *
 * Limits: a number keeps its area code when its owner moves (mobile numbers above all), so the
 * table says where a number was issued, not where its owner is — the contact's own `time_zone`
 * wins when it is set. Area codes not listed here (new overlays, Canada, the Caribbean) get the
 * window that is safe in every US zone. Refresh the overlays from NANPA's list when new codes
 * come into service.
 */

const ZONE_NAMES = {
  E: 'America/New_York',
  C: 'America/Chicago',
  M: 'America/Denver',
  A: 'America/Phoenix',
  P: 'America/Los_Angeles',
  K: 'America/Anchorage',
  D: 'America/Adak',
  H: 'Pacific/Honolulu',
  R: 'America/Puerto_Rico',
  G: 'Pacific/Guam',
  S: 'Pacific/Saipan',
  W: 'Pacific/Pago_Pago',
} as const;

/** Area codes by the zone letters above; two letters: the area spans both zones. */
const AREA_CODES: Record<string, string> = {
  E: `201 202 203 207 212 215 216 220 223 227 229 231 234 239 240 248 252 260 267 269 272 276 283 301 302 304 305
      313 315 317 321 324 326 329 330 332 336 339 347 351 352 363 380 386 401 404 407 410 412 413 419 434 436 440
      443 445 463 470 472 475 478 484 502 508 513 516 517 518 540 551 561 567 570 571 582 585 586 603 607 609 610
      614 616 617 624 631 640 645 646 656 667 678 680 681 686 689 703 704 706 716 717 718 724 727 728 732 734 740
      743 754 757 762 765 770 771 772 774 781 786 802 803 804 810 813 814 826 828 835 838 839 843 845 848 854 856
      857 859 860 862 863 864 865 878 904 908 910 912 914 917 919 929 934 937 941 943 947 948 954 959 973 978 980
      984 989`,
  C: `205 210 214 217 218 224 225 228 235 251 254 256 262 274 281 309 312 314 316 318 319 320 325 327 331 334 337
      346 353 361 402 405 409 414 417 430 432 447 464 469 479 501 504 507 512 515 531 534 539 557 563 572 573 580
      601 608 612 615 618 629 630 636 641 651 659 660 662 682 708 712 713 715 726 731 737 763 769 773 779 806 815
      816 817 830 832 847 861 870 872 901 903 913 918 920 931 936 938 940 945 952 956 972 975 979 985`,
  M: '303 307 385 406 435 505 575 719 720 801 915 970 983',
  A: '623',
  P: `206 209 213 253 279 310 323 341 350 360 369 408 415 424 425 442 458 503 509 510 530 559 562 564 619 626 628
      650 657 661 669 702 707 714 725 747 760 805 818 820 831 840 858 909 916 925 949 951 971`,
  H: '808',
  R: '340 787 939',
  G: '671',
  S: '670',
  W: '684',
  EC: '219 270 364 423 448 574 606 812 850 906 930',
  CM: '308 605 620 701 785',
  MP: '208 541 775 986',
  AM: '480 520 602 928',
  KD: '907',
};

const ZONES_BY_AREA_CODE: ReadonlyMap<string, readonly string[]> = new Map(
  Object.entries(AREA_CODES).flatMap(([letters, codes]) => {
    const zones = [...letters].map((letter) => ZONE_NAMES[letter as keyof typeof ZONE_NAMES]);
    return codes
      .trim()
      .split(/\s+/)
      .map((code) => [code, zones] as const);
  }),
);

/** The zones a number with this area code may be in, or undefined when the table does not know it. */
export function zonesOfAreaCode(areaCode: string): readonly string[] | undefined {
  return ZONES_BY_AREA_CODE.get(areaCode);
}

/**
 * Every zone a US number can be in, for numbers the table does not know. Guam, the Northern
 * Marianas and American Samoa are left out: no hour of the day is inside the window in both
 * Guam and Hawaii, and their area codes are in the table.
 */
export const ALL_US_ZONES: readonly string[] = [
  'America/Puerto_Rico',
  'America/New_York',
  'America/Chicago',
  'America/Denver',
  'America/Phoenix',
  'America/Los_Angeles',
  'America/Anchorage',
  'America/Adak',
  'Pacific/Honolulu',
];

/**
 * Florida, Oklahoma and Washington allow calls until 20:00 rather than 21:00; Florida presumes a
 * number with a Florida area code belongs to a Florida resident, and the same reading is applied
 * to the other two.
 */
const EARLY_END_AREA_CODES = new Set(
  [
    // Florida
    '239 305 321 324 352 386 407 448 561 645 656 689 727 728 754 772 786 813 850 863 904 941 954',
    // Oklahoma
    '405 539 572 580 918',
    // Washington
    '206 253 360 425 509 564',
  ]
    .join(' ')
    .split(' '),
);

/** Whether calls to this area code must end by 20:00 local time (FL, OK, WA). */
export function endsEarly(areaCode: string): boolean {
  return EARLY_END_AREA_CODES.has(areaCode);
}
